"""The wire-neutral plan of one answer: which deltas to send, the finish reason and the token counts.

Every wire (OpenAI today, Gemini and Anthropic later) renders the same plan, so a fault such as
"cut after 2 content chunks" means the same thing whichever wire the gateway speaks to.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from freellm.sim.scenario import Scenario

__all__ = ["Frame", "FrameKind", "Plan", "ToolPlan", "build_plan", "split_even"]


class FrameKind(enum.IntEnum):
    """Role of a rendered frame for the stream driver (cut/stall counting and chunk delays).

    NOISE frames (keep-alive comments, garbage lines) are never counted or delayed; PRE frames (role,
    reasoning) come before the counted output; CONTENT frames are counted by ``cut_after``/``stall_after``;
    POST frames (finish, usage, in-band error, terminator) are never sent once a cut or stall is pending.
    """

    NOISE = 0
    PRE = 1
    CONTENT = 2
    POST = 3


class Frame(NamedTuple):
    """One pre-rendered write: the exact bytes and their role. A tuple keeps the per-chunk loop cheap."""

    data: bytes
    kind: FrameKind


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """One tool call: its id and name, and the argument text split into the fragments to stream."""

    index: int
    id: str
    name: str
    arguments: str
    fragments: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """What the answer contains once the scenario is applied to this request."""

    text: str
    text_pieces: tuple[str, ...]
    reasoning: str
    reasoning_pieces: tuple[str, ...]
    tools: tuple[ToolPlan, ...]
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        """Sum reported as ``total_tokens`` by wires that have it."""
        return self.prompt_tokens + self.completion_tokens


def split_even(text: str, parts: int) -> tuple[str, ...]:
    """Split ``text`` into ``parts`` nearly equal non-empty pieces (fewer when the text is shorter)."""
    if not text:
        return ()
    k = max(1, min(parts, len(text)))
    n = len(text)
    return tuple(text[i * n // k : (i + 1) * n // k] for i in range(k))


def build_plan(scenario: Scenario, provider: str, model: str, prompt_chars: int, id_seed: str) -> Plan:
    """Apply ``scenario`` to one request. Token counts are chars // 4 (min 1), like a rough tokenizer."""
    text = scenario.answer_text(provider, model)
    reasoning = "" if scenario.empty or scenario.reasoning is None else scenario.reasoning
    tools: tuple[ToolPlan, ...] = ()
    if not scenario.empty:
        tools = tuple(
            ToolPlan(
                index=i,
                id=spec.id or f"call_{id_seed}_{i}",
                name=spec.name,
                arguments=spec.arguments,
                fragments=split_even(spec.arguments, scenario.tool_fragments),
            )
            for i, spec in enumerate(scenario.tool_calls)
        )
    out_chars = len(text) + len(reasoning) + sum(len(t.name) + len(t.arguments) for t in tools)
    return Plan(
        text=text,
        text_pieces=split_even(text, scenario.chunks),
        reasoning=reasoning,
        reasoning_pieces=split_even(reasoning, 2),
        tools=tools,
        finish_reason=scenario.effective_finish_reason(),
        prompt_tokens=max(1, prompt_chars // 4),
        completion_tokens=max(1, out_chars // 4),
    )


def interleave_garbage(frames: list[Frame], garbage: Sequence[bytes]) -> list[Frame]:
    """Put one of the wire's garbage lines after every real frame but the last, cycling through them
    (the ``malformed`` fault: what a client must skip without losing a real frame)."""
    out: list[Frame] = []
    n = 0
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        out.append(frame)
        if i < last and frame.kind is not FrameKind.NOISE:
            out.append(Frame(garbage[n % len(garbage)], FrameKind.NOISE))
            n += 1
    return out
