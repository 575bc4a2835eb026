"""Rendering a simulator plan as Gemini answers: a ``GenerateContentResponse`` or its stream frames.

Streams are one response object per content chunk: thought parts (``thought: true``) for the reasoning
(the last one carrying the scenario's ``reasoning_signature`` as ``thoughtSignature``, when it has one),
text parts, one ``functionCall`` part per tool call (whole arguments, as Gemini sends them; the first call
carries a ``thoughtSignature``, :func:`thought_signature_of`), then a final frame with ``finishReason`` and
``usageMetadata``. Content chunks for ``cut_after``/``stall_after``/``inband_error_after`` are the text
frames and the function-call frames. A stream is framed as SSE (``alt=sse``, one response per ``data:``
line) or as a streamed JSON array; the non-stream answer carries the same thoughts, text, calls and usage
in one response. Transport faults (cut, stall, delays) are left to the simulator's driver.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Final, Literal

import orjson

from freellm.sim.gemini_wire.errors import inband_error_body
from freellm.sim.plan import Frame, FrameKind, Plan, interleave_garbage
from freellm.sim.scenario import Scenario
from freellm.sim.wire import RequestView

__all__ = [
    "GARBAGE_FRAMES",
    "KEEPALIVE_FRAME",
    "Mode",
    "finish_reason_of",
    "render_completion",
    "render_stream",
    "thought_signature_of",
]

Mode = Literal["unary", "sse", "json"]
"""How an answer is framed: one JSON body, SSE, or a streamed JSON array."""

KEEPALIVE_FRAME: Final = b": keep-alive\r\n\r\n"
GARBAGE_FRAMES: Final = (
    b"data: {not json\r\n\r\n",
    b": sim comment\r\n\r\n",
    b"this line has no data prefix\r\n\r\n",
)
# finish_reason of a scenario (OpenAI vocabulary) -> Gemini finishReason; other strings upper-cased.
_FINISH: Final[dict[str, str]] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}


def finish_reason_of(finish_reason: str | None) -> str | None:
    """The Gemini ``finishReason`` for a scenario's finish reason."""
    if finish_reason is None:
        return None
    return _FINISH.get(finish_reason, finish_reason.upper())


def thought_signature_of(name: str, arguments: str) -> str:
    """The signature the simulator puts on a function call (deterministic, so tests can expect it)."""
    digest = hashlib.sha256(f"{name}\x00{arguments}".encode()).digest()
    return base64.b64encode(b"sim-sig:" + digest[:18]).decode()


def render_stream(
    mode: Mode, plan: Plan, scenario: Scenario, view: RequestView, response_id: str
) -> list[Frame]:
    """All frames of the stream (a JSON array for ``"json"``, else SSE); transport faults are the driver's."""
    usage = _usage(plan) if scenario.usage != "none" else None
    running = (
        {"promptTokenCount": plan.prompt_tokens, "totalTokenCount": plan.prompt_tokens}
        if scenario.usage == "separate"
        else None
    )
    items: list[tuple[dict[str, Any], FrameKind]] = []

    def add(parts: list[dict[str, Any]], kind: FrameKind) -> None:
        items.append((_response(parts, view, response_id, usage=running), kind))

    thoughts, texts, calls = _parts(plan, scenario)
    for part in thoughts:
        add([part], FrameKind.PRE)
    if scenario.empty:
        add([{"text": ""}], FrameKind.PRE)
    content = [[p] for p in texts] + [[p] for p in calls]
    inband = scenario.inband_error
    if inband is not None:
        del content[scenario.inband_error_after :]
    for parts in content:
        add(parts, FrameKind.CONTENT)
    if inband is not None:
        items.append((inband_error_body(inband), FrameKind.POST))
    else:
        finish = finish_reason_of(plan.finish_reason) if scenario.done else None
        items.append(
            (
                _response([{"text": ""}], view, response_id, finish=finish, usage=usage),
                FrameKind.POST,
            )
        )

    if mode == "json":
        frames = []
        for n, (obj, kind) in enumerate(items):
            prefix = b"[" if n == 0 else b",\r\n"
            frames.append(Frame(prefix + orjson.dumps(obj), kind))
        frames.append(Frame(b"]", FrameKind.POST))
        return frames
    frames = [Frame(KEEPALIVE_FRAME, FrameKind.NOISE)] * scenario.keepalive_comments
    frames.extend(Frame(b"data: " + orjson.dumps(obj) + b"\r\n\r\n", kind) for obj, kind in items)
    if scenario.malformed:
        frames = interleave_garbage(frames, GARBAGE_FRAMES)
    return frames


def render_completion(plan: Plan, scenario: Scenario, view: RequestView, response_id: str) -> dict[str, Any]:
    """The ``GenerateContentResponse`` carrying the same thoughts, text, calls and usage."""
    _, texts, calls = _parts(plan, scenario)
    parts: list[dict[str, Any]] = []
    if plan.reasoning:
        thought: dict[str, Any] = {"text": plan.reasoning, "thought": True}
        if scenario.reasoning_signature is not None:
            thought["thoughtSignature"] = scenario.reasoning_signature
        parts.append(thought)
    if plan.text:
        text_part: dict[str, Any] = {"text": plan.text}
        if texts and "thoughtSignature" in texts[-1]:
            text_part["thoughtSignature"] = texts[-1]["thoughtSignature"]
        parts.append(text_part)
    parts.extend(calls)
    usage = _usage(plan) if scenario.usage != "none" else None
    finish = finish_reason_of(plan.finish_reason)
    return _response(parts, view, response_id, finish=finish, usage=usage)


def _usage(plan: Plan) -> dict[str, int]:
    thoughts = max(1, len(plan.reasoning) // 4) if plan.reasoning else 0
    candidates = max(1, plan.completion_tokens - thoughts)
    usage = {
        "promptTokenCount": plan.prompt_tokens,
        "candidatesTokenCount": candidates,
        "totalTokenCount": plan.prompt_tokens + candidates + thoughts,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def _response(
    parts: list[dict[str, Any]],
    view: RequestView,
    response_id: str,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    out: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        out["usageMetadata"] = usage
    out["modelVersion"] = view.model
    out["responseId"] = response_id
    return out


def _parts(
    plan: Plan, scenario: Scenario
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(thought parts, text parts, function-call parts) of the answer, one part per stream chunk."""
    thoughts: list[dict[str, Any]] = [{"text": piece, "thought": True} for piece in plan.reasoning_pieces]
    if thoughts and scenario.reasoning_signature is not None:
        thoughts[-1]["thoughtSignature"] = scenario.reasoning_signature
    texts: list[dict[str, Any]] = [{"text": piece} for piece in plan.text_pieces]
    calls: list[dict[str, Any]] = []
    for i, tool in enumerate(plan.tools):
        try:
            args = orjson.loads(tool.arguments)
        except orjson.JSONDecodeError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        call: dict[str, Any] = {"name": tool.name, "args": args}
        if i < len(scenario.tool_calls) and scenario.tool_calls[i].id is not None:
            call = {"id": tool.id, **call}  # a scripted id plays a Gemini-issued functionCall.id
        part: dict[str, Any] = {"functionCall": call}
        if i == 0:  # parallel calls: only the first carries the signature, as Gemini does
            part["thoughtSignature"] = thought_signature_of(tool.name, tool.arguments)
        calls.append(part)
    if plan.reasoning and texts and not calls:
        texts[-1]["thoughtSignature"] = thought_signature_of("", plan.text)
    return thoughts, texts, calls
