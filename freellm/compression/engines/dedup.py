"""dedup (lossless): a block of non-system text (split on blank-line runs, code fences kept whole) that
repeats an earlier block of the conversation (≥ ``min_block_chars`` chars, ≥ ``min_block_lines`` lines)
becomes ``[repeated from earlier in this conversation: <first 60 chars>…]``.

Earlier blocks of system messages, frozen or locked messages count as sources; only later copies are
replaced, so the earliest copy always stays and every span of a replaced block survives in it."""

from __future__ import annotations

from pydantic import Field

from freellm.compression.engines import EngineParams
from freellm.compression.text import one_line, split_blocks
from freellm.compression.types import EngineContext, EngineResult, Message, Slots, content_str, with_content

__all__ = ["ID", "LOSSY", "MARKER_PREFIX", "Params", "marker", "run"]

ID = "dedup"
LOSSY = False
MARKER_PREFIX = "[repeated from earlier in this conversation: "


class Params(EngineParams):
    min_block_chars: int = Field(default=80, ge=1)
    min_block_lines: int = Field(default=3, ge=1)
    preview_chars: int = Field(default=60, ge=1)


def marker(block: str, preview_chars: int) -> str:
    return f"{MARKER_PREFIX}{one_line(block, preview_chars)}…]"


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    seen: set[str] = set()
    out: list[Message | None] = list(messages)
    min_chars, min_lines = params.min_block_chars, params.min_block_lines

    def qualifies(block: str) -> bool:
        return len(block) >= min_chars and block.count("\n") + 1 >= min_lines

    for i, m in enumerate(messages):
        if m is None:
            continue
        text = content_str(m)
        if text is None:
            content = m.get("content")
            if isinstance(content, list):
                for part in content:
                    t = part.get("text") if isinstance(part, dict) else None
                    if isinstance(t, str):
                        seen.update(b for b, _ in split_blocks(t) if qualifies(b))
            continue
        blocks = split_blocks(text)
        if m.get("role") == "system" or i in ctx.locked:
            seen.update(b for b, _ in blocks if qualifies(b))
            continue
        pieces: list[str] = []
        changed = False
        for block, sep in blocks:
            if qualifies(block):
                if block in seen:
                    mark = marker(block, params.preview_chars)
                    if len(mark) < len(block):
                        block = mark
                        changed = True
                else:
                    seen.add(block)
            pieces.append(block)
            pieces.append(sep)
        if changed:
            out[i] = with_content(m, "".join(pieces))
    return EngineResult(out)
