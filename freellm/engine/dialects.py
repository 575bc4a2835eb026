"""Stream-side detection of inline tool-call dialects: the seam the pump uses to decide whether to hold.

Weak models sometimes write a tool call as text in their own dialect instead of a structured call.
When tools were requested, text that starts with one of these markers is held back (``dialect`` mode)
so the markup never reaches the client; text that can no longer become a marker is released at once.
Parsing the held text into structured calls (the rescue) lives in :mod:`freellm.engine.tools.rescue`.

Besides the markers, a *bare JSON* call (``{"name": "<declared tool>", "arguments": …}``, optionally in
a `````json`` fence) is recognised from its head: :func:`bare_json_head` says whether a probe already
names a declared tool, could still do so, or is ruled out. An ordinary JSON answer is ruled out as soon
as its first key is not ``"name"`` or its value stops being a prefix of a declared tool's name, so it
is held for a dozen characters at most.

Everything here runs only while the pump is ``undecided`` (a few chunks per turn), never per chunk of a
committed stream.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

__all__ = [
    "DIALECT_MARKERS",
    "HEAD_MATCH",
    "HEAD_NO",
    "HEAD_PREFIX",
    "THINK_CLOSE",
    "THINK_OPEN",
    "bare_json_head",
    "contains_marker",
    "could_become_marker",
    "partial_suffix",
    "starts_with_marker",
]

DIALECT_MARKERS: tuple[str, ...] = (
    "<|tool_calls_section_begin|>",  # Kimi K2 sections
    "<|tool_call_begin|>",  # the same family without the section wrapper
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",  # DeepSeek V3/R1 (full-width bars, U+2581 underscores)
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<tool_call>",  # Hermes / Qwen XML
    "<function=",  # Llama-style function tags (and Qwen3-Coder's <function=…><parameter=…>)
)

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"

HEAD_NO: Final = 0
"""The probe can no longer be the head of a bare JSON tool call."""
HEAD_PREFIX: Final = 1
"""The probe is still a prefix of a bare JSON call head (or blank)."""
HEAD_MATCH: Final = 2
"""The probe starts with ``{"name": "<declared tool>"``: hold the whole answer."""

_WS = " \t\r\n"


def starts_with_marker(probe: str) -> bool:
    """True when ``probe`` (already left-stripped) begins with a complete dialect marker."""
    return probe.startswith(DIALECT_MARKERS)


def could_become_marker(probe: str) -> bool:
    """True while ``probe`` is blank or a strict prefix of some marker, so holding it is still justified."""
    if not probe:
        return True
    return any(marker.startswith(probe) for marker in DIALECT_MARKERS)


def contains_marker(text: str) -> bool:
    """True when a dialect marker appears anywhere in ``text`` (the non-stream / held-text check)."""
    return any(marker in text for marker in DIALECT_MARKERS)


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a strict prefix of ``tag`` (a tag split across
    chunks); 0 when the end of ``text`` cannot start ``tag``."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


def _skip_ws(probe: str, i: int) -> int:
    n = len(probe)
    while i < n and probe[i] in _WS:
        i += 1
    return i


def _literal(probe: str, i: int, lit: str) -> int:
    """Index after ``lit`` at ``i``; -1 if the probe ends inside it (prefix); -2 on a mismatch."""
    part = probe[i : i + len(lit)]
    if part == lit:
        return i + len(lit)
    return -1 if lit.startswith(part) else -2


def bare_json_head(probe: str, names: Collection[str]) -> int:
    """Classify a left-stripped probe against ``{"name": "<one of names>"`` (optionally fenced).

    Returns :data:`HEAD_MATCH`, :data:`HEAD_PREFIX` or :data:`HEAD_NO`. Only the head is looked at; the
    rescue parses the whole object at the end of the stream.
    """
    if not names:
        return HEAD_NO
    if not probe:
        return HEAD_PREFIX
    i = 0
    if probe[0] == "`":
        i = _literal(probe, 0, "```")
        if i < 0:
            return HEAD_PREFIX if i == -1 else HEAD_NO
        lang = probe[i : i + 4].lower()
        if lang == "json":
            i += 4
        elif "json".startswith(lang) and i + len(lang) == len(probe):
            return HEAD_PREFIX
        i = _skip_ws(probe, i)
    for lit in ("{", '"name"', ":", '"'):
        if i >= len(probe):
            return HEAD_PREFIX
        i = _literal(probe, i, lit)
        if i < 0:
            return HEAD_PREFIX if i == -1 else HEAD_NO
        if lit != '"':
            i = _skip_ws(probe, i)
    # The name value runs to the closing quote (tool names are plain identifiers: no escapes).
    end = probe.find('"', i)
    if end < 0:
        partial = probe[i:]
        return HEAD_PREFIX if any(n.startswith(partial) for n in names) else HEAD_NO
    return HEAD_MATCH if probe[i:end] in names else HEAD_NO

