"""Structured output enforcement: a ``response_format`` of ``json_object``/``json_schema`` means JSON.

Free models often ignore ``response_format``: they wrap the JSON in a Markdown fence, add a sentence
before it, or answer in prose. :func:`enforce_json` runs once on the whole answer, before anything of it
reached the client (spec/core.md §9):

* valid JSON passes unchanged;
* JSON in a fence, or else the longest ``{…}``/``[…]`` slice of the prose that decodes, is *healed*:
  the answer becomes that JSON;
* anything else is a dead turn: "ignored response_format" (or "truncated json" when the upstream
  stopped at its token limit), which the classifier turns into a failover that skips this model for the
  request, with no cooldown and no penalty.

With strict validation on, a ``json_schema`` answer must also match its schema (fail open on a bad
schema, as for tool arguments).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.engine.tools.rescue import json_end
from freellm.engine.tools.validate import schema_problem
from freellm.errors import UpstreamError

__all__ = ["enforce_json", "heal_json"]

_FENCE: Final = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
_MAX_STARTS: Final = 64


def _decodes(text: str) -> tuple[bool, Any]:
    try:
        return True, orjson.loads(text)
    except orjson.JSONDecodeError:
        return False, None


def heal_json(text: str) -> tuple[str, Any] | None:
    """``(json_text, value)`` for the JSON in ``text``, or None when there is none.

    ``json_text`` is ``text`` itself when the whole answer is valid JSON.
    """
    ok, value = _decodes(text)
    if ok:
        return text, value
    for match in _FENCE.finditer(text):
        inner = match.group(1).strip()
        ok, value = _decodes(inner)
        if ok and inner:
            return inner, value
    return _longest_slice(text)


def _longest_slice(text: str) -> tuple[str, Any] | None:
    """The longest ``{…}`` or ``[…]`` slice that decodes: first the outermost slices (first opener to
    last closer), then each bracket-matched block from the first few openers."""
    candidates: list[str] = []
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    starts = [i for i, ch in enumerate(text) if ch in "{["][:_MAX_STARTS]
    for i in starts:
        end = json_end(text, i)
        if end > 0:
            candidates.append(text[i:end])
    best: tuple[str, Any] | None = None
    for cand in sorted(candidates, key=len, reverse=True):
        if best is not None and len(cand) <= len(best[0]):
            break
        ok, value = _decodes(cand)
        if ok and isinstance(value, dict | list):
            best = (cand, value)
    return best


def enforce_json(
    text: str,
    finish_reason: str | None,
    *,
    schema: Mapping[str, Any] | None = None,
    strict: bool = False,
) -> str:
    """The answer to send for a ``response_format`` turn; raises :class:`UpstreamError` to fail over."""
    healed = heal_json(text)
    if healed is None:
        if finish_reason == "length":
            raise UpstreamError(
                "truncated json: the reply was cut at max_tokens (finish_reason length)",
                skip_model=True,
                skip_bench=True,
            )
        raise UpstreamError("ignored response_format: the reply is not JSON", skip_model=True, skip_bench=True)
    json_text, value = healed
    if strict and schema:
        problem = schema_problem(value, schema)
        if problem:
            raise UpstreamError(
                f"ignored response_format: the reply does not match the json_schema ({problem})",
                skip_model=True,
                skip_bench=True,
            )
    return json_text
