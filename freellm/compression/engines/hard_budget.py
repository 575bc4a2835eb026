"""hard-budget (aggressive, only with a target): delete unprotected lines — lines touching no protected
span, error or constraint line — by lowest (position fraction + role weight: tool 0.2, assistant 0.5,
user 0.8) until the request is under 4 x target characters, so old tool-output lines go first. System
messages, the last message and the last user message are never touched; a message left empty reads
``[… trimmed …]``."""

from __future__ import annotations

import bisect
import re

from pydantic import Field

from freellm.compression.engines import EngineParams
from freellm.compression.protect import protected_ranges
from freellm.compression.types import (
    TOOL_ROLES,
    EngineContext,
    EngineResult,
    Message,
    Slots,
    content_str,
    total_chars,
    with_content,
)

__all__ = ["ID", "LOSSY", "Params", "run"]

ID = "hard-budget"
LOSSY = True
EMPTY = "[… trimmed …]"
_MANY_BREAKS_RE = re.compile(r"\n{3,}")


class Params(EngineParams):
    tool_weight: float = Field(default=0.2, ge=0)
    assistant_weight: float = Field(default=0.5, ge=0)
    user_weight: float = Field(default=0.8, ge=0)


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    out: list[Message | None] = list(messages)
    target = ctx.target_chars
    if target is None:
        return EngineResult(out)
    total = total_chars(messages)
    if total <= target:
        return EngineResult(out)
    weights = {"tool": params.tool_weight, "function": params.tool_weight,
               "assistant": params.assistant_weight, "user": params.user_weight}
    present = [i for i, m in enumerate(messages) if m is not None]
    if not present:
        return EngineResult(out)
    last = present[-1]
    last_user = next((i for i in reversed(present) if (m := messages[i]) and m.get("role") == "user"), -1)
    span = max(1, len(messages) - 1)
    candidates: list[tuple[float, int, int, int]] = []
    split: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        text = content_str(m)
        if m is None or text is None or i in ctx.locked or i in (last, last_user):
            continue
        role = m.get("role")
        weight = weights.get(str(role))
        if weight is None:
            continue
        ranges = protected_ranges(text, instructions=role not in TOOL_ROLES)
        ends = [b for _, b in ranges]
        lines = text.split("\n")
        split[i] = lines
        score = i / span + weight
        pos = 0
        for j, line in enumerate(lines):
            end = pos + len(line)
            if line.strip():
                k = bisect.bisect_right(ends, pos)
                if not (k < len(ranges) and ranges[k][0] < end):
                    candidates.append((score, i, j, len(line) + 1))
            pos = end + 1
    candidates.sort()
    remove: dict[int, set[int]] = {}
    for _, i, j, cost in candidates:
        if total <= target:
            break
        remove.setdefault(i, set()).add(j)
        total -= cost
    for i, gone in remove.items():
        m = messages[i]
        if m is None:
            continue
        kept = "\n".join(line for j, line in enumerate(split[i]) if j not in gone)
        kept = _MANY_BREAKS_RE.sub("\n\n", kept).strip("\n")
        out[i] = with_content(m, kept if kept.strip() else EMPTY)
    return EngineResult(out)
