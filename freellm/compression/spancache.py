"""The per-``compress``-call memo of what the fidelity gate derives from a text.

The engines of a mode run one after another over mostly the same messages, and the gate judges each of
them against the request before and after it: without a memo it would scan an unchanged message once per
engine. One :class:`SpanCache` is created per ``compress`` call and passed down (no module-level state,
nothing outlives the request); texts are keyed by their string, so an engine's equal copy of a message
hits too.
"""

from __future__ import annotations

from freellm.compression.protect import NUMBER_RE, Spans, spans_of, strip_ansi
from freellm.compression.types import TOOL_ROLES, Message, message_text

__all__ = ["SpanCache"]


class SpanCache:
    """Each text's protected spans, number literals and stripped lines, computed at most once per call."""

    __slots__ = ("_lines", "_numbers", "_spans", "_texts")

    def __init__(self) -> None:
        self._spans: dict[tuple[str, bool], Spans] = {}
        self._texts: dict[int, tuple[Message, str]] = {}
        self._numbers: dict[str, frozenset[str]] = {}
        self._lines: dict[str, frozenset[str]] = {}

    def text(self, m: Message) -> str:
        """:func:`message_text` of ``m``, by identity (the message objects outlive the call, so ``id`` is
        stable; the stored reference guards against a reused id)."""
        hit = self._texts.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        t = message_text(m)
        self._texts[id(m)] = (m, t)
        return t

    def spans(self, text: str, *, instructions: bool) -> Spans:
        key = (text, instructions)
        hit = self._spans.get(key)
        if hit is None:
            hit = spans_of(text, instructions=instructions)
            self._spans[key] = hit
        return hit

    def message_spans(self, m: Message) -> Spans:
        return self.spans(self.text(m), instructions=m.get("role") not in TOOL_ROLES)

    def numbers(self, text: str) -> frozenset[str]:
        """``spans_of(text).numbers`` (it does not depend on ``instructions``) without the other spans."""
        hit = self._numbers.get(text)
        if hit is None:
            full = self._spans.get((text, False)) or self._spans.get((text, True))
            hit = full.numbers if full is not None else frozenset(NUMBER_RE.findall(strip_ansi(text)))
            self._numbers[text] = hit
        return hit

    def lines(self, text: str) -> frozenset[str]:
        """The non-blank lines of ``text`` (split on ``\\n`` only, as the span patterns are), stripped."""
        hit = self._lines.get(text)
        if hit is None:
            hit = frozenset(map(str.strip, text.split("\n"))) - _BLANK
            self._lines[text] = hit
        return hit


_BLANK = frozenset({""})
