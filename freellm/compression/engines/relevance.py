"""relevance (aggressive): when the plain conversation text (user and assistant messages without tool
calls, other than the last user message) exceeds ``max_chars``, every such message over
max(``min_message_chars``, ``max_chars`` / count) keeps, in order, its sentences that overlap the last user
message most — and always every sentence touching a protected span, error or constraint line. A run of
dropped sentences becomes ``…``. (Query "fix the parser bug" → the sentences naming the parser or the bug
survive.) Words are compared by their first five letters, stop words ignored."""

from __future__ import annotations

import bisect
import re

from pydantic import Field

from freellm.compression.engines import EngineParams
from freellm.compression.protect import protected_ranges
from freellm.compression.types import (
    EngineContext,
    EngineResult,
    Message,
    Slots,
    content_str,
    message_text,
    with_content,
)

__all__ = ["ID", "LOSSY", "Params", "condense", "run", "stems"]

ID = "relevance"
LOSSY = True

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_UNIT_SEP_RE = re.compile(r"(?<=[.!?])[ \t]+|\n+")
_STOP = frozenset(
    ["the", "and", "for", "are", "but", "not", "you", "your", "yours", "with", "this", "that", "these", "those", "from", "have", "has", "had", "was", "were", "will", "would", "can", "could", "should", "shall", "may", "might", "must", "into", "onto", "about", "above", "below", "than", "then", "them", "they", "their", "there", "here", "what", "when", "where", "which", "while", "who", "whom", "whose", "why", "how", "all", "any", "each", "few", "more", "most", "other", "some", "such", "only", "own", "same", "very", "just", "also", "its", "it's", "our", "ours", "out", "over", "under", "again", "once", "please", "thanks", "thank", "let", "lets", "okay", "yes", "now", "get", "got", "make", "made", "does", "did", "doing", "done", "being", "been", "because", "like", "want", "need", "use", "using", "used"]
)


class Params(EngineParams):
    max_chars: int = Field(default=18000, ge=1)
    min_message_chars: int = Field(default=240, ge=1)


def stems(text: str) -> set[str]:
    out: set[str] = set()
    for w in _WORD_RE.findall(text):
        lw = w.lower()
        if lw not in _STOP:
            out.add(lw[:5])
    return out


def _eligible(m: Message | None) -> bool:
    return (
        m is not None
        and m.get("role") in ("user", "assistant")
        and isinstance(m.get("content"), str)
        and not m.get("tool_calls")
    )


def _overlaps(ranges: list[tuple[int, int]], ends: list[int], a: int, b: int) -> bool:
    k = bisect.bisect_right(ends, a)
    return k < len(ranges) and ranges[k][0] < b


def condense(text: str, query: set[str], budget: int) -> str:
    """``text`` cut to about ``budget`` characters by query overlap (protected sentences always kept)."""
    ranges = protected_ranges(text, instructions=True)
    ends = [b for _, b in ranges]
    units: list[tuple[int, int, int]] = []  # start, end, end of the separator after it
    pos = 0
    for m in _UNIT_SEP_RE.finditer(text):
        if m.start() > pos:
            units.append((pos, m.start(), m.end()))
        elif units:
            a, b, _ = units[-1]
            units[-1] = (a, b, m.end())
        pos = m.end()
    if pos < len(text):
        units.append((pos, len(text), len(text)))
    keep = [_overlaps(ranges, ends, a, b) for a, b, _ in units]
    size = sum(s - a for (a, _, s), k in zip(units, keep, strict=True) if k)
    scored = sorted(
        ((len(stems(text[a:b]) & query), j) for j, (a, b, _) in enumerate(units) if not keep[j]),
        key=lambda x: (-x[0], x[1]),
    )
    for score, j in scored:
        if score <= 0:
            break
        a, _, s = units[j]
        if size + (s - a) > budget:
            continue
        keep[j] = True
        size += s - a
    if all(keep):
        return text
    out: list[str] = []
    gap_sep: str | None = None
    for (a, b, s), k in zip(units, keep, strict=True):
        if k:
            if gap_sep is not None:
                out.append("…" + gap_sep)
                gap_sep = None
            out.append(text[a:s])
        else:
            gap_sep = text[b:s] or " "
    if gap_sep is not None:
        out.append("…")
    return "".join(out)


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    out: list[Message | None] = list(messages)
    last_user = next((i for i in range(len(messages) - 1, -1, -1) if (m := messages[i]) and m.get("role") == "user"), None)
    if last_user is None:
        return EngineResult(out)
    lu = messages[last_user]
    query = stems(message_text(lu)) if lu is not None else set()
    eligible = [i for i, m in enumerate(messages) if i != last_user and _eligible(m)]
    total = sum(len(content_str(messages[i]) or "") for i in eligible)
    if not eligible or total <= params.max_chars:
        return EngineResult(out)
    budget = max(params.min_message_chars, params.max_chars // len(eligible))
    for i in eligible:
        m = messages[i]
        text = content_str(m)
        if m is None or text is None or i in ctx.locked or len(text) <= budget:
            continue
        new = condense(text, query, budget)
        if len(new) < len(text):
            out[i] = with_content(m, new)
    return EngineResult(out)
