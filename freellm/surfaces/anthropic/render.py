"""Canonical chunks and turns → Anthropic Messages output (spec/surfaces.md §2 "Non-stream", "Stream").

:class:`MessagesRenderer` is a pure, per-request translator: it is given each batch of canonical chunks
the pump releases and returns the exact SSE bytes (``event: <type>\\ndata: <json>\\n\\n``). Its block
bookkeeping guarantees the order Anthropic clients expect:

``message_start`` (at the commit point, ``content: []``) → a ``thinking`` block while reasoning arrives
before the text (``thinking_delta``…, ``signature_delta``, stop) → the ``text`` block (``text_delta``…)
→ each tool call as a ``tool_use`` block (``input: {}``, ONE ``input_json_delta`` with the full JSON,
stop) → ``message_delta`` (``stop_reason``, ``usage.output_tokens``) → ``message_stop``. Reasoning that
arrives after the text has started is held and emitted as a thinking block once the text block closes.
The ``signature_delta`` carries the upstream's signature (a chunk's ``reasoning_signature``) when it
gave one, else ``""``; reasoning that follows a signature opens a new thinking block, so each block
keeps its own signature and a client can send the blocks back to an Anthropic upstream unchanged.
After commit an upstream failure is one ``error`` event, and the stream ends there.
"""

from __future__ import annotations

import secrets
from typing import Any, Literal

import orjson

from freellm.core.chunks import MARKER_KEY, Chunk, read_chunk
from freellm.core.tokens import estimate_text_tokens
from freellm.engine.context import TurnOutcome
from freellm.errors import ClientError, Exhausted

__all__ = [
    "MessagesRenderer",
    "anthropic_error_body",
    "error_type_for_status",
    "message_body",
    "new_message_id",
    "stop_reason",
    "tool_input",
]

_STOP_REASONS = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def stop_reason(finish: str | None, has_tool_calls: bool) -> str:
    """Canonical finish reason → Anthropic ``stop_reason`` (tool calls always win)."""
    if has_tool_calls:
        return "tool_use"
    return _STOP_REASONS.get(finish or "stop", "end_turn")


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's argument text as the ``input`` object (``{}`` when it is not a JSON object; a
    double-encoded object is decoded once)."""
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


class _ToolIds:
    """Tool-use ids: the upstream's, or ``toolu_<16hex>_<n>`` when it gave none (the pump's
    ``call_stream_N`` placeholders repeat from turn to turn, which breaks a client's history)."""

    def __init__(self) -> None:
        self._prefix = f"toolu_{secrets.token_hex(8)}"
        self._n = 0

    def __call__(self, call_id: str) -> str:
        if call_id and not call_id.startswith("call_stream_"):
            return call_id
        out = f"{self._prefix}_{self._n}"
        self._n += 1
        return out


def _usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    value = (usage or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---- non-stream -------------------------------------------------------------------------------------


def message_body(
    outcome: TurnOutcome, *, model: str, input_estimate: int, message_id: str | None = None
) -> dict[str, Any]:
    """The non-stream ``message`` for a finished turn; ``model`` is the client's string, echoed."""
    result = outcome.result
    ids = _ToolIds()
    content: list[dict[str, Any]] = []
    if result.reasoning:
        content.append(
            {"type": "thinking", "thinking": result.reasoning, "signature": result.reasoning_signature}
        )
    if result.text:
        content.append({"type": "text", "text": result.text})
    for call in result.tool_calls:
        content.append(
            {"type": "tool_use", "id": ids(call.id), "name": call.name, "input": tool_input(call.arguments)}
        )
    if not result.text and not result.tool_calls:
        content.append({"type": "text", "text": ""})
    usage = result.usage
    input_tokens = _usage_int(usage, "prompt_tokens")
    output_tokens = _usage_int(usage, "completion_tokens")
    return {
        "id": message_id or new_message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(result.finish_reason, bool(result.tool_calls)),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens if input_tokens is not None else input_estimate,
            "output_tokens": output_tokens if output_tokens is not None else outcome.tokens_out,
        },
    }


# ---- errors -----------------------------------------------------------------------------------------


def error_type_for_status(status: int) -> str:
    """Anthropic's error ``type`` for an HTTP status."""
    if status == 400 or status == 422:
        return "invalid_request_error"
    if status == 401:
        return "authentication_error"
    if status == 402:
        return "billing_error"
    if status == 403:
        return "permission_error"
    if status == 404:
        return "not_found_error"
    if status == 413:
        return "request_too_large"
    if status == 429:
        return "rate_limit_error"
    if status == 504:
        return "timeout_error"
    if status in (503, 529):
        return "overloaded_error"
    if status >= 500:
        return "api_error"
    return "invalid_request_error"


def anthropic_error_body(exc: ClientError | Exhausted) -> dict[str, Any]:
    """``{"type": "error", "error": {type, message, code?, retryAtMs?}}`` with the type from the status."""
    err: dict[str, Any] = {"type": error_type_for_status(exc.status), "message": exc.message}
    if exc.code is not None:
        err["code"] = exc.code
    if isinstance(exc, Exhausted) and exc.retry_at_ms is not None:
        err["retryAtMs"] = exc.retry_at_ms
    return {"type": "error", "error": err}


# ---- stream -----------------------------------------------------------------------------------------


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class MessagesRenderer:
    """Per-request stream renderer (see the module doc). Not reusable across requests."""

    content_type = "text/event-stream"

    def __init__(self, model: str, *, input_tokens: int, message_id: str | None = None) -> None:
        self.model = model
        self.message_id = message_id or new_message_id()
        self.input_tokens = input_tokens
        self._ids = _ToolIds()
        self._started = False
        self._index = 0
        self._open: Literal["text", "thinking"] | None = None
        self._signature = ""  # of the open thinking block
        self._late: list[list[str]] = []  # reasoning after the text started: [text, signature] per block
        self._finish: str | None = None
        self._tool_use = False
        self._usage: dict[str, Any] | None = None
        self._out_chars = 0
        self._continued: Any = None
        """The finish chunk's continuation marker (stream.continue_on_failure), for ``message_delta``."""

    # -- the StreamRenderer protocol ------------------------------------------------------------------

    def chunks(self, chunks: list[Chunk]) -> bytes:
        out: list[bytes] = []
        if not self._started:
            out.append(self._message_start())
        for chunk in chunks:
            delta, finish, usage = read_chunk(chunk)
            if usage is not None:
                self._usage = usage
            if finish is not None:
                self._finish = finish
                self._continued = chunk.get(MARKER_KEY)
            if delta is None:
                continue
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._reasoning(reasoning, out)
            signature = delta.get("reasoning_signature")
            if isinstance(signature, str) and signature:
                self._signed(signature)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text(content, out)
            calls = delta.get("tool_calls")
            if calls:
                self._tool_calls(calls, out)
        return b"".join(out)

    def stream_error(self, provider: str, message: str) -> bytes:
        body = {
            "type": "error",
            "error": {
                "type": "api_error",
                "message": f"Provider error ({provider}): stream interrupted: {message}",
            },
        }
        return _frame("error", body)

    def done(self) -> bytes:
        out: list[bytes] = []
        if not self._started:
            out.append(self._message_start())
        self._close(out)
        self._flush_reasoning(out)
        usage: dict[str, Any] = {}
        input_tokens = _usage_int(self._usage, "prompt_tokens")
        if input_tokens is not None:
            usage["input_tokens"] = input_tokens
        output_tokens = _usage_int(self._usage, "completion_tokens")
        usage["output_tokens"] = (
            output_tokens if output_tokens is not None else estimate_text_tokens(self._out_chars)
        )
        message_delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(self._finish, self._tool_use), "stop_sequence": None},
            "usage": usage,
        }
        if self._continued is not None:
            message_delta[MARKER_KEY] = self._continued
        out.append(_frame("message_delta", message_delta))
        out.append(_frame("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    # -- fusion progress (freellm.fusion) ----------------------------------------------------------------

    def opening(self) -> bytes:
        """A fusion stream opens at once with ``message_start``."""
        return b"" if self._started else self._message_start()

    def progress(self, event: dict[str, Any]) -> bytes:
        """One ``fusion`` event (``_fusion``: the panel or judge event), always after ``message_start``:
        the anthropic SDK rejects unknown named events before it and skips them after it."""
        return self.opening() + _frame("fusion", {"type": "fusion", "_fusion": event})

    # -- blocks -----------------------------------------------------------------------------------------

    def _message_start(self) -> bytes:
        self._started = True
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": 0},
        }
        return _frame("message_start", {"type": "message_start", "message": message})

    def _start(self, block: dict[str, Any], out: list[bytes]) -> None:
        out.append(
            _frame(
                "content_block_start",
                {"type": "content_block_start", "index": self._index, "content_block": block},
            )
        )

    def _delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        out.append(
            _frame(
                "content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta}
            )
        )

    def _stop(self, out: list[bytes]) -> None:
        out.append(_frame("content_block_stop", {"type": "content_block_stop", "index": self._index}))
        self._index += 1

    def _close(self, out: list[bytes]) -> None:
        if self._open == "thinking":
            self._delta({"type": "signature_delta", "signature": self._signature}, out)
            self._signature = ""
        if self._open is not None:
            self._stop(out)
            self._open = None

    def _reasoning(self, text: str, out: list[bytes]) -> None:
        self._out_chars += len(text)
        if self._open == "text":
            if not self._late or self._late[-1][1]:
                self._late.append(["", ""])
            self._late[-1][0] += text
            return
        if self._open == "thinking" and self._signature:
            self._close(out)  # the previous block is complete (signed): this reasoning is a new one
        if self._open is None:
            self._start({"type": "thinking", "thinking": "", "signature": ""}, out)
            self._open = "thinking"
        self._delta({"type": "thinking_delta", "thinking": text}, out)

    def _signed(self, signature: str) -> None:
        """The upstream's signature over the reasoning just sent: for the open (or held) thinking block.
        One arriving when no unsigned block is open has nothing to sign and is dropped."""
        if self._open == "thinking" and not self._signature:
            self._signature = signature
        elif self._open == "text" and self._late and not self._late[-1][1]:
            self._late[-1][1] = signature

    def _flush_reasoning(self, out: list[bytes]) -> None:
        late, self._late = self._late, []
        for text, signature in late:
            self._start({"type": "thinking", "thinking": "", "signature": ""}, out)
            self._open = "thinking"
            self._delta({"type": "thinking_delta", "thinking": text}, out)
            self._signature = signature
            self._close(out)

    def _text(self, text: str, out: list[bytes]) -> None:
        self._out_chars += len(text)
        if self._open != "text":
            self._close(out)
            self._start({"type": "text", "text": ""}, out)
            self._open = "text"
        self._delta({"type": "text_delta", "text": text}, out)

    def _tool_calls(self, calls: list[Any], out: list[bytes]) -> None:
        self._close(out)
        self._flush_reasoning(out)
        for call in calls:
            if not isinstance(call, dict):
                continue
            fn = call.get("function") or {}
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                continue
            args = fn.get("arguments")
            arguments = args if isinstance(args, str) else "{}"
            call_id = call.get("id")
            self._out_chars += len(arguments)
            self._tool_use = True
            block = {
                "type": "tool_use",
                "id": self._ids(call_id if isinstance(call_id, str) else ""),
                "name": name,
                "input": {},
            }
            self._start(block, out)
            partial = orjson.dumps(tool_input(arguments)).decode()
            self._delta({"type": "input_json_delta", "partial_json": partial}, out)
            self._stop(out)
