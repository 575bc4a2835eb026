"""lite (lossless): drop a later system message whose text repeats an earlier one; outside code fences trim
trailing blanks and squeeze 3+ line breaks (``"a  \\n\\n\\n\\nb"`` → ``"a\\n\\nb"``)."""

from __future__ import annotations

from freellm.compression.engines import EngineParams
from freellm.compression.text import squeeze
from freellm.compression.types import EngineContext, EngineResult, Message, Slots, content_str, with_content

__all__ = ["ID", "LOSSY", "Params", "run"]

ID = "lite"
LOSSY = False


class Params(EngineParams):
    pass


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    out: list[Message | None] = list(messages)
    systems: set[str] = set()
    for i, m in enumerate(messages):
        text = content_str(m)
        if m is None or text is None:
            continue
        locked = i in ctx.locked
        if m.get("role") == "system":
            if text in systems and not locked and not m.get("cache_control"):
                out[i] = None
                continue
            systems.add(text)
        if locked:
            continue
        new = squeeze(text)
        if new != text:
            out[i] = with_content(m, new)
    return EngineResult(out)
