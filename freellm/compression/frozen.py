"""What no lossy (or, for recurring system prompts, no) engine may rewrite.

- **Frozen system prompts** (when ``prefix_freeze``): a system message whose exact text appeared in ≥ 3
  compressed requests — counting the current one, so from its third request on — is never rewritten by
  any engine, which keeps the provider's prompt cache warm. The memory is per compressor (one per app),
  LRU-bounded at 5000 texts, and stores digests, not texts.
- **Cache-control prefix**: every message up to and including the last message carrying
  ``cache_control`` (on a content part or on the message) is never rewritten by a lossy engine.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from freellm.compression.types import Message, content_str

__all__ = ["FREEZE_AFTER", "MEMORY_SIZE", "FrozenPrompts", "cache_control_prefix"]

FREEZE_AFTER = 3
MEMORY_SIZE = 5000


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class FrozenPrompts:
    __slots__ = ("_counts", "_size", "_threshold")

    def __init__(self, *, size: int = MEMORY_SIZE, threshold: int = FREEZE_AFTER) -> None:
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._size = size
        self._threshold = threshold

    def __len__(self) -> int:
        return len(self._counts)

    def frozen(self, messages: Sequence[Message | None], *, record: bool) -> frozenset[int]:
        """Indices of the frozen system messages; with ``record`` this request counts first."""
        systems: dict[bytes, list[int]] = {}
        for i, m in enumerate(messages):
            if m is not None and m.get("role") == "system":
                text = content_str(m)
                if text is not None:
                    systems.setdefault(_digest(text), []).append(i)
        if not systems:
            return frozenset()
        out: set[int] = set()
        counts = self._counts
        for d, idx in systems.items():
            n = counts.get(d, 0)
            if record:
                n += 1
                counts[d] = n
                counts.move_to_end(d)
            if n >= self._threshold:
                out.update(idx)
        if record:
            while len(counts) > self._size:
                counts.popitem(last=False)
        return frozenset(out)


def _has_cache_control(m: Message) -> bool:
    if m.get("cache_control"):
        return True
    c = m.get("content")
    if isinstance(c, list):
        return any(isinstance(p, dict) and p.get("cache_control") for p in c)
    return False


def cache_control_prefix(messages: Sequence[Message | None]) -> int:
    """How many leading messages lossy engines must leave alone (0 without any ``cache_control``)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m is not None and _has_cache_control(m):
            return i + 1
    return 0
