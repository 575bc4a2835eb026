"""The OpenAI Chat Completions wire: request reading and rendering of plans, errors and model lists.

Frames are rendered up front as bytes so the stream driver's per-chunk work is one ``write``; the shapes
follow what OpenAI and the OpenAI-compatible free providers actually send (role on the first delta, a
separate empty-delta finish frame, a choice-less usage frame, ``data: [DONE]``).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

import orjson
from aiohttp import web

from freellm.sim.plan import Frame, FrameKind, Plan, interleave_garbage
from freellm.sim.scenario import Scenario
from freellm.sim.wire import RequestView, WireRequestError

__all__ = ["OPENAI_WIRE", "OpenAIWire"]

DONE_FRAME: Final = b"data: [DONE]\n\n"
KEEPALIVE_FRAME: Final = b": keep-alive\n\n"
# What "malformed" interleaves: a broken JSON frame, a comment, and a line that is not a data field.
GARBAGE_FRAMES: Final = (
    b"data: {not json\n\n",
    b": sim comment\n\n",
    b"this line has no data prefix\n\n",
)

# status -> (type, code), as OpenAI labels them; anything else 5xx is a server_error.
_ERROR_LABELS: Final[dict[int, tuple[str, str | None]]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    402: ("insufficient_quota", "insufficient_quota"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def _text_of(content: Any) -> str:
    """Text of a message ``content``: a string, or the text parts of a content array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


class OpenAIWire:
    """Stateless renderer/reader for ``/v1/chat/completions``; one shared instance serves every app."""

    name = "openai"
    stream_headers: Mapping[str, str] = {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
    }

    def credential(self, request: web.BaseRequest) -> str | None:
        """The bearer token, or ``None`` when the Authorization header is missing or not ``Bearer``."""
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        return token

    def new_response_id(self) -> str:
        """``chatcmpl-sim-<hex>``: recognisably simulated, unique enough for any test run."""
        return "chatcmpl-sim-" + secrets.token_hex(12)

    def parse_request(self, body: Any, route: Mapping[str, str]) -> RequestView:
        """Check the fields the simulator relies on; everything else in the body is accepted as is."""
        if not isinstance(body, dict):
            raise WireRequestError("request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise WireRequestError("you must provide a model parameter")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise WireRequestError("'messages' must be an array")
        stream = body.get("stream", False)
        if stream is None:
            stream = False
        if not isinstance(stream, bool):
            raise WireRequestError("'stream' must be a boolean")
        prompt_chars = 0
        last_user = ""
        for m in messages:
            if not isinstance(m, dict):
                raise WireRequestError("each message must be an object")
            text = _text_of(m.get("content"))
            prompt_chars += len(text)
            if m.get("role") == "user":
                last_user = text
        return RequestView(
            model=model,
            stream=stream,
            prompt_chars=prompt_chars,
            last_user_text=last_user,
            messages_json=lambda: orjson.dumps(messages).decode(),
        )

    def _usage(self, plan: Plan) -> dict[str, int]:
        return {
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": plan.completion_tokens,
            "total_tokens": plan.total_tokens,
        }

    def render_stream(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> list[Frame]:
        """All frames of the stream. Faults that live in the data (in-band error, finish, usage, [DONE],
        garbage) are rendered here; transport faults (cut, stall, delays) are left to the driver."""
        head = {"id": response_id, "object": "chat.completion.chunk", "created": created, "model": view.model}
        items: list[tuple[dict[str, Any], FrameKind]] = []

        def add(delta: dict[str, Any], kind: FrameKind, finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            items.append(({**head, "choices": [choice]}, kind))

        for piece in plan.reasoning_pieces:
            add({scenario.reasoning_field: piece}, FrameKind.PRE)
        if scenario.empty:
            add({"content": ""}, FrameKind.PRE)
        content: list[dict[str, Any]] = [{"content": piece} for piece in plan.text_pieces]
        for tool in plan.tools:
            content.append(
                {
                    "tool_calls": [
                        {
                            "index": tool.index,
                            "id": tool.id,
                            "type": "function",
                            "function": {"name": tool.name, "arguments": ""},
                        }
                    ]
                }
            )
            content.extend(
                {"tool_calls": [{"index": tool.index, "function": {"arguments": frag}}]}
                for frag in tool.fragments
            )
        inband = scenario.inband_error
        if inband is not None:
            del content[scenario.inband_error_after :]
        for delta in content:
            add(delta, FrameKind.CONTENT)

        tail: list[bytes] = []
        if inband is not None:
            tail.append(b"data: " + orjson.dumps(self.render_inband_error(inband)) + b"\n\n")
        else:
            if plan.finish_reason is not None:
                add({}, FrameKind.POST, plan.finish_reason)
            if scenario.usage == "last" and items:
                items[-1][0]["usage"] = self._usage(plan)
            elif scenario.usage != "none":
                usage_chunk = {**head, "choices": [], "usage": self._usage(plan)}
                tail.append(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        if scenario.done:
            tail.append(DONE_FRAME)

        if items:  # the first delta announces the role, as every OpenAI-compatible server does
            first_delta = items[0][0]["choices"][0]
            first_delta["delta"] = {"role": "assistant", **first_delta["delta"]}

        frames = [Frame(KEEPALIVE_FRAME, FrameKind.NOISE)] * scenario.keepalive_comments
        frames.extend(Frame(b"data: " + orjson.dumps(chunk) + b"\n\n", kind) for chunk, kind in items)
        frames.extend(Frame(data, FrameKind.POST) for data in tail)
        if scenario.malformed:
            frames = interleave_garbage(frames, GARBAGE_FRAMES)
        return frames

    def render_completion(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> dict[str, Any]:
        """The ``chat.completion`` object carrying the same text, reasoning, tool calls and usage."""
        content: Any
        if scenario.content_array:
            content = [{"type": "text", "text": plan.text}] if plan.text else []
        else:
            content = plan.text if plan.text or not plan.tools else None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if plan.reasoning:
            message[scenario.reasoning_field] = plan.reasoning
        if plan.tools:
            message["tool_calls"] = [
                {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
                for t in plan.tools
            ]
        body: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": view.model,
            "choices": [{"index": 0, "message": message, "finish_reason": plan.finish_reason}],
        }
        if scenario.usage != "none":
            body["usage"] = self._usage(plan)
        return body

    def render_error(self, status: int, message: str) -> dict[str, Any]:
        """OpenAI's ``{"error": {message, type, param, code}}`` envelope."""
        err_type, code = _ERROR_LABELS.get(status, ("server_error" if status >= 500 else "api_error", None))
        return {"error": {"message": message, "type": err_type, "param": None, "code": code}}

    def render_inband_error(self, message: str) -> dict[str, Any]:
        """The error object some providers send as a ``data:`` frame mid-stream."""
        return {"error": {"message": message, "type": "server_error"}}

    def models_list(self, provider: str, models: list[str]) -> dict[str, Any]:
        """``GET /v1/models`` body."""
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": provider} for m in models],
        }


OPENAI_WIRE: Final = OpenAIWire()
"""The shared stateless instance (holds no data, so module level is fine)."""
