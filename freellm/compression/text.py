"""Fence-aware text helpers shared by the engines (blocks, whitespace squeezing)."""

from __future__ import annotations

import re

from freellm.compression.protect import diff_ranges, fence_ranges

__all__ = ["one_line", "split_blocks", "squeeze"]

_BLANK_RUN_RE = re.compile(r"\n(?:[ \t]*\n)+")
_MANY_BREAKS_RE = re.compile(r"\n\n\n+")
"""3+ line breaks (``\\n{3,}``, spelled with a literal prefix: ``re`` then finds candidates by a fast
substring search instead of trying every position)."""
_WS_RE = re.compile(r"\s+")


def _inside(ranges: list[tuple[int, int]], pos: int) -> bool:
    return any(a <= pos < b for a, b in ranges)


def split_blocks(text: str) -> list[tuple[str, str]]:
    """``text`` as (block, separator-after) pairs, split on runs of blank lines outside code fences.
    ``"".join(b + s for b, s in split_blocks(t)) == t``."""
    fences = fence_ranges(text)
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _BLANK_RUN_RE.finditer(text):
        if fences and _inside(fences, m.start()):
            continue
        out.append((text[pos : m.start()], m.group(0)))
        pos = m.end()
    out.append((text[pos:], ""))
    return out


def _trim_trailing(seg: str) -> str:
    """Remove the spaces and tabs before every ``\\n`` (what ``re.sub(r"[ \\t]+(?=\\n)", "", seg)`` does, at
    a tenth of its cost: a regex over a log tries every space of it); the last line, with no ``\\n`` after
    it, keeps its own."""
    if " \n" not in seg and "\t\n" not in seg:
        return seg
    lines = seg.split("\n")
    last = lines.pop()
    return "\n".join([*(line.rstrip(" \t") for line in lines), last])


def _squeeze_plain(seg: str, *, last: bool) -> str:
    seg = _trim_trailing(seg)
    if "\n\n\n" in seg:
        seg = _MANY_BREAKS_RE.sub("\n\n", seg)
    return seg.rstrip() if last else seg


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    ranges.sort()
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out


def squeeze(text: str) -> str:
    """Trim trailing blanks on every line, squeeze 3+ line breaks to 2 and trim the end — outside code
    fences and diff hunks (whose blank context lines and trailing spaces carry meaning)."""
    fences = _merge(fence_ranges(text) + diff_ranges(text))
    if not fences:
        return _squeeze_plain(text, last=True)
    parts: list[str] = []
    pos = 0
    for a, b in fences:
        parts.append(_squeeze_plain(text[pos:a], last=False))
        parts.append(text[a:b])
        pos = b
    if pos < len(text):
        parts.append(_squeeze_plain(text[pos:], last=True))
    return "".join(parts)


def one_line(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text`` with whitespace runs collapsed to one space."""
    return _WS_RE.sub(" ", text[:limit]).strip()
