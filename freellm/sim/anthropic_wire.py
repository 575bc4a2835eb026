"""The Anthropic Messages wire: rendering of plans, errors and model lists; requests are checked by
:mod:`freellm.sim.anthropic_checks`.

``POST /{provider}/v1/messages`` with ``x-api-key`` (or a bearer token). Requests are checked the way Anthropic checks them
(unknown top-level fields, ``max_tokens`` required, roles, empty text, tool_use/tool_result pairing,
tools declared, thinking budget, temperature range, whitespace stop sequences, trailing whitespace in a
final assistant turn, at most 4 ``cache_control`` breakpoints, thinking blocks sent back signed — and
unmodified, for the ``sim-sig-`` signatures the simulator issues (:func:`signature_of`) — and first in
the assistant turn of a tool loop continued with thinking on): a gateway that translates badly gets the
400 ``invalid_request_error`` Anthropic would send, so translation bugs show up in tests.

Streams follow Anthropic's event sequence (``event:`` line + ``data:`` object carrying ``type``):
``message_start``, ``ping``, a thinking block (``thinking_delta`` pieces then a ``signature_delta``: the
scenario's ``reasoning_signature``, else :func:`signature_of` the reasoning), a
text block (``text_delta`` pieces), ``tool_use`` blocks (``input: {}`` then ``input_json_delta``
fragments), ``message_delta`` (``stop_reason`` + ``usage.output_tokens``) and ``message_stop``.
Content chunks for ``cut_after``/``stall_after``/``inband_error_after`` are the text deltas, each
tool_use start and each ``input_json_delta``, exactly as on the OpenAI wire; block start/stop frames,
pings and signatures are structural (never counted or delayed).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

import orjson
from aiohttp import web

from freellm.sim.anthropic_checks import check_request, signature_of
from freellm.sim.plan import Frame, FrameKind, Plan, interleave_garbage
from freellm.sim.scenario import Scenario
from freellm.sim.wire import RequestView
from freellm.wire.sse import encode_event

__all__ = ["ANTHROPIC_WIRE", "AnthropicWire", "signature_of", "stop_reason_of"]

GARBAGE_FRAMES: Final = (
    b"event: content_block_delta\ndata: {not json\n\n",
    b": sim comment\n\n",
    b"this line has no data prefix\n\n",
)

# status -> Anthropic error type (https://docs.anthropic.com/en/api/errors).
_ERROR_TYPES: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# finish_reason of a scenario (OpenAI vocabulary) -> Anthropic stop_reason; other strings pass as is.
_STOP_REASONS: Final[dict[str, str]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}



def stop_reason_of(finish_reason: str | None) -> str | None:
    """The Anthropic ``stop_reason`` for a scenario's finish reason."""
    if finish_reason is None:
        return None
    return _STOP_REASONS.get(finish_reason, finish_reason)


def _event(name: str, data: dict[str, Any]) -> bytes:
    return encode_event(name, orjson.dumps({"type": name, **data}))


def _text_of(content: Any) -> str:
    """Text of a ``content`` (string, or the text blocks and string tool results of a block list)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(_text_of(block.get("content")))
    return "".join(parts)


def _user_text(content: Any) -> str:
    """The user's own words in a turn (tool results excluded), where inline directives live."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))


class AnthropicWire:
    """Stateless renderer/reader for ``/v1/messages``; one shared instance serves every app."""

    name = "anthropic"
    missing_key_message = "x-api-key header is required"
    stream_headers: Mapping[str, str] = {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
    }

    def credential(self, request: web.BaseRequest) -> str | None:
        """The ``x-api-key`` header, else a bearer token (current Anthropic SDKs send the API key as
        ``Authorization: Bearer``); ``None`` when neither is there."""
        key = request.headers.get("x-api-key", "").strip()
        if key:
            return key
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        return token if scheme.lower() == "bearer" and token else None

    def new_response_id(self) -> str:
        """``msg_sim_<hex>``."""
        return "msg_sim_" + secrets.token_hex(12)

    def parse_request(self, body: Any, route: Mapping[str, str]) -> RequestView:
        """Check the body as Anthropic does; raise :class:`WireRequestError` with Anthropic's wording."""
        check_request(body)
        messages: list[dict[str, Any]] = body["messages"]
        system = body.get("system")
        prompt_chars = len(_text_of(system)) + sum(len(_text_of(m.get("content"))) for m in messages)
        last_user = ""
        for m in messages:
            if m["role"] == "user":
                text = _user_text(m.get("content"))
                if text:
                    last_user = text

        def messages_json() -> str:
            listed = [{"role": "system", "content": system}, *messages] if system else messages
            return orjson.dumps(listed).decode()

        return RequestView(
            model=body["model"],
            stream=bool(body.get("stream")),
            prompt_chars=prompt_chars,
            last_user_text=last_user,
            messages_json=messages_json,
        )

    def render_stream(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> list[Frame]:
        """All frames of the stream; transport faults (cut, stall, delays) are left to the driver."""
        with_usage = scenario.usage != "none"
        message: dict[str, Any] = {
            "id": response_id,
            "type": "message",
            "role": "assistant",
            "model": view.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
        }
        if with_usage:
            message["usage"] = {"input_tokens": plan.prompt_tokens, "output_tokens": 1}
        frames = [Frame(_event("message_start", {"message": message}), FrameKind.PRE)]
        ping = Frame(_event("ping", {}), FrameKind.NOISE)
        frames.extend([ping] * (1 + scenario.keepalive_comments))

        index = 0
        if plan.reasoning_pieces:
            frames.append(_structural("content_block_start", index, {"type": "thinking", "thinking": ""}))
            for piece in plan.reasoning_pieces:
                frames.append(_delta(index, {"type": "thinking_delta", "thinking": piece}, FrameKind.PRE))
            frames.append(_signature(index, _reasoning_signature(plan, scenario)))
            frames.append(_stop(index))
            index += 1
        if scenario.empty:
            frames.append(_structural("content_block_start", index, {"type": "text", "text": ""}))
            frames.append(_stop(index))
            index += 1

        body: list[Frame] = []  # text and tool frames, in the order they would be sent
        if plan.text_pieces:
            body.append(_structural("content_block_start", index, {"type": "text", "text": ""}))
            body.extend(
                _delta(index, {"type": "text_delta", "text": p}, FrameKind.CONTENT) for p in plan.text_pieces
            )
            body.append(_stop(index))
            index += 1
        for tool in plan.tools:
            block = {"type": "tool_use", "id": tool.id, "name": tool.name, "input": {}}
            body.append(
                Frame(
                    _event("content_block_start", {"index": index, "content_block": block}), FrameKind.CONTENT
                )
            )
            body.extend(
                _delta(index, {"type": "input_json_delta", "partial_json": frag}, FrameKind.CONTENT)
                for frag in tool.fragments
            )
            body.append(_stop(index))
            index += 1

        inband = scenario.inband_error
        if inband is not None:
            body = _first_content(body, scenario.inband_error_after)
            body.append(Frame(_event("error", {"error": self._inband_error_object(inband)}), FrameKind.POST))
            frames.extend(body)
        else:
            frames.extend(body)
            delta: dict[str, Any] = {"stop_reason": stop_reason_of(plan.finish_reason), "stop_sequence": None}
            tail: dict[str, Any] = {"delta": delta}
            if with_usage:
                tail["usage"] = {"output_tokens": plan.completion_tokens}
            frames.append(Frame(_event("message_delta", tail), FrameKind.POST))
            if scenario.done:
                frames.append(Frame(_event("message_stop", {}), FrameKind.POST))
        if scenario.malformed:
            frames = interleave_garbage(frames, GARBAGE_FRAMES)
        return frames

    def render_completion(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> dict[str, Any]:
        """The ``message`` object carrying the same thinking, text, tool calls and usage."""
        content: list[dict[str, Any]] = []
        if plan.reasoning:
            signature = _reasoning_signature(plan, scenario)
            content.append({"type": "thinking", "thinking": plan.reasoning, "signature": signature})
        if plan.text:
            content.append({"type": "text", "text": plan.text})
        for tool in plan.tools:
            try:
                tool_input = orjson.loads(tool.arguments)
            except orjson.JSONDecodeError:
                tool_input = {}
            content.append({"type": "tool_use", "id": tool.id, "name": tool.name, "input": tool_input})
        body: dict[str, Any] = {
            "id": response_id,
            "type": "message",
            "role": "assistant",
            "model": view.model,
            "content": content,
            "stop_reason": stop_reason_of(plan.finish_reason),
            "stop_sequence": None,
        }
        if scenario.usage != "none":
            body["usage"] = {"input_tokens": plan.prompt_tokens, "output_tokens": plan.completion_tokens}
        return body

    def render_error(self, status: int, message: str) -> dict[str, Any]:
        """Anthropic's ``{"type": "error", "error": {"type", "message"}}`` envelope."""
        err_type = _ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": err_type, "message": message}}

    def render_inband_error(self, message: str) -> dict[str, Any]:
        """The ``error`` event's object (also the 200 body of a non-stream in-band error)."""
        return {"type": "error", "error": self._inband_error_object(message)}

    def _inband_error_object(self, message: str) -> dict[str, str]:
        lowered = message.lower()
        err_type = "overloaded_error" if "overload" in lowered else "api_error"
        return {"type": err_type, "message": message}

    def models_list(self, provider: str, models: list[str]) -> dict[str, Any]:
        """Anthropic's ``GET /v1/models`` body."""
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in models
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": models[0] if models else None,
            "last_id": models[-1] if models else None,
        }


def _structural(event: str, index: int, block: dict[str, Any]) -> Frame:
    return Frame(_event(event, {"index": index, "content_block": block}), FrameKind.NOISE)


def _delta(index: int, delta: dict[str, Any], kind: FrameKind) -> Frame:
    return Frame(_event("content_block_delta", {"index": index, "delta": delta}), kind)


def _stop(index: int) -> Frame:
    return Frame(_event("content_block_stop", {"index": index}), FrameKind.NOISE)


def _reasoning_signature(plan: Plan, scenario: Scenario) -> str:
    if scenario.reasoning_signature is not None:
        return scenario.reasoning_signature
    return signature_of(plan.reasoning)


def _signature(index: int, signature: str) -> Frame:
    delta = {"type": "signature_delta", "signature": signature}
    return Frame(_event("content_block_delta", {"index": index, "delta": delta}), FrameKind.NOISE)


def _first_content(frames: list[Frame], n: int) -> list[Frame]:
    """The frames up to (not including) the ``n+1``-th content frame: where an in-band error goes."""
    seen = 0
    for i, frame in enumerate(frames):
        if frame.kind is FrameKind.CONTENT:
            if seen == n:
                return frames[:i]
            seen += 1
    return list(frames)


ANTHROPIC_WIRE: Final = AnthropicWire()
"""The shared stateless instance."""
