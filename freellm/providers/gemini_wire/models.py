"""What a model id tells the request translator: Gemma or Gemini, and which Gemini generation.

Several translation rules depend on the model family rather than on the request: Gemma refuses system
instructions, JSON mode and thinking; Gemini 3 and later want ``thinkingLevel`` instead of
``thinkingBudget`` and refuse a replayed function call without a thought signature. The id checks live
here once so :mod:`.request`, :mod:`.contents` and :mod:`.generation` agree on them.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["gemini_major", "is_gemma", "needs_thought_signatures"]

_GEMINI_VERSION: Final = re.compile(r"gemini-(\d+)")


def is_gemma(model: str) -> bool:
    """Gemma ids (``gemma-3-27b-it``, ``models/gemma-4-31b-it``) reject system instructions and thinking."""
    return "gemma" in model.lower()


def gemini_major(model: str) -> int | None:
    """The Gemini major version of a model id (``gemini-2.5-flash`` → 2), or None."""
    m = _GEMINI_VERSION.search(model.lower())
    return int(m.group(1)) if m else None


def needs_thought_signatures(model: str) -> bool:
    """Gemini 3 and later refuse a replayed function call without a thought signature."""
    major = gemini_major(model)
    return major is not None and major >= 3
