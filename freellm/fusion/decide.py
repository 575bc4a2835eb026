"""What a fusion request does with its panel's answers — a pure decision, tested with golden files.

In order: no survivor → the exhaustion ladder's answer (429 when every member ran out on rate limits,
else 502); the first survivor (in panel order) with tool calls wins outright; fewer than two text
survivors, or ``best_of`` → the longest answer; otherwise the judge writes the answer. When the judge
fails, :func:`fallback_answer` picks the longest panel answer instead (with ``response_format``, the
longest one that is valid JSON).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

__all__ = ["Answer", "Failure", "Verdict", "decide", "fallback_answer"]


@dataclass(frozen=True, slots=True)
class Answer:
    """A member that answered: its text and whether it asked for tool calls."""

    text: str
    tool_calls: bool = False


@dataclass(frozen=True, slots=True)
class Failure:
    """A member that gave up: the status its exhaustion would have answered with."""

    status: int
    retry_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: Literal["fail", "tool_call", "best", "judge"]
    index: int | None = None
    """The answer used (``tool_call``, ``best``), an index into the survivors."""
    status: int = 0
    """``fail``: 429 or 502."""
    retry_at_ms: int | None = None
    """``fail`` with 429: the soonest moment any member's routes free up."""
    reason: str = ""
    """Why no judge: ``best_of``, ``single_answer``, ``tool_call`` — or why it failed."""


def decide(answers: Sequence[Answer], failures: Sequence[Failure], *, strategy: str) -> Verdict:
    if not answers:
        if failures and all(f.status == 429 for f in failures):
            retry = [f.retry_at_ms for f in failures if f.retry_at_ms is not None]
            return Verdict("fail", status=429, retry_at_ms=min(retry) if retry else None, reason="rate_limited")
        return Verdict("fail", status=502, reason="upstream_failed")
    for i, answer in enumerate(answers):
        if answer.tool_calls:
            return Verdict("tool_call", index=i, reason="tool_call")
    if strategy == "best_of":
        return Verdict("best", index=_longest(answers), reason="best_of")
    if len(answers) < 2:
        return Verdict("best", index=_longest(answers), reason="single_answer")
    return Verdict("judge")


def fallback_answer(answers: Sequence[Answer], *, json_required: bool) -> int | None:
    """The longest text answer (the earliest of equals); with ``json_required`` only one that parses
    as a JSON object counts (what ``response_format`` asks for). None: nothing usable (a 502)."""
    usable = [i for i, a in enumerate(answers) if not json_required or _is_json(a.text)]
    if not usable:
        return None
    return max(usable, key=lambda i: (len(answers[i].text), -i))


def _longest(answers: Sequence[Answer]) -> int:
    return max(range(len(answers)), key=lambda i: (len(answers[i].text), -i))


def _is_json(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False
