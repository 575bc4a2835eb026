"""Leading ``<think>…</think>`` blocks in content become reasoning.

Some hosts serve reasoning models (DeepSeek R1 distills, QwQ, Qwen3) without splitting the thought out:
it arrives as content, wrapped in ``<think>`` tags. :class:`ThinkSplitter` is a tiny sans-IO state
machine the pump feeds with each content delta until the question is settled:

* ``probe`` — the left-stripped text so far is blank or a strict prefix of ``<think>``: hold it
  (an ordinary answer is released as soon as its first character rules the tag out);
* ``inside`` — everything up to ``</think>`` is reasoning, released as it comes except a trailing
  fragment that could be the start of a split ``</think>``;
* ``trim`` — after the block, leading whitespace of the answer is dropped;
* done — the splitter is out of the way and the pump never calls it again.

Only a *leading* block counts: ``<think>`` later in an answer is the answer's own text.
"""

from __future__ import annotations

from typing import Literal

from freellm.engine.dialects import THINK_CLOSE, THINK_OPEN, partial_suffix

__all__ = ["ThinkSplitter"]

_State = Literal["probe", "inside", "trim", "done"]


class ThinkSplitter:
    __slots__ = ("_buf", "_state")

    def __init__(self) -> None:
        self._state: _State = "probe"
        self._buf = ""

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, text: str) -> tuple[str, str]:
        """Take one content delta; return ``(reasoning, content)`` that may be released now."""
        state = self._state
        if state == "probe":
            buf = self._buf + text
            probe = buf.lstrip()
            if probe.startswith(THINK_OPEN):
                self._state = "inside"
                self._buf = ""
                return self._inside(probe[len(THINK_OPEN) :])
            if THINK_OPEN.startswith(probe):  # blank, or "<", "<th"…
                self._buf = buf
                return "", ""
            self._state = "done"
            self._buf = ""
            return "", buf
        if state == "inside":
            return self._inside(self._buf + text)
        if state == "trim":
            text = text.lstrip()
            if text:
                self._state = "done"
            return "", text
        return "", text

    def _inside(self, buf: str) -> tuple[str, str]:
        end = buf.find(THINK_CLOSE)
        if end >= 0:
            self._buf = ""
            rest = buf[end + len(THINK_CLOSE) :].lstrip()
            self._state = "done" if rest else "trim"
            return buf[:end], rest
        keep = partial_suffix(buf, THINK_CLOSE)
        if keep:
            self._buf = buf[-keep:]
            return buf[:-keep], ""
        self._buf = ""
        return buf, ""

    def finish(self) -> tuple[str, str]:
        """End of the answer: an unclosed block is all reasoning; a held prefix is plain text."""
        buf, state = self._buf, self._state
        self._buf = ""
        self._state = "done"
        if state == "inside":
            return buf, ""
        if state == "probe":
            return "", buf
        return "", ""
