"""Canonical chunks and turns → Gemini ``GenerateContentResponse`` (spec/surfaces.md §3a "Non-stream",
"Stream") and Gemini's error envelope.

:class:`GeminiStreamRenderer` is a pure, per-request translator: it is given each batch of canonical
chunks the pump releases and returns the exact bytes, in one of Gemini's two stream framings:

* ``?alt=sse`` — ``data: <json>\\n\\n`` per response chunk (``text/event-stream``);
* otherwise — one streamed JSON array (``application/json``): ``[`` + chunk, ``,\\n`` + chunk, …,
  ``\\n]``.

Each canonical chunk that carries output becomes one response chunk ``{candidates: [{content: {role:
"model", parts}, index: 0}], modelVersion, responseId}`` whose parts are ``{text, thought: true}``
(reasoning, only with ``includeThoughts``), ``{text}`` and ``{functionCall: {id, name, args}}`` (all
of a turn's calls arrive complete, in one chunk). :meth:`~GeminiStreamRenderer.done` always ends with
a chunk that carries ``finishReason`` (Gemini CLI retries a stream without one, duplicating the text)
and ``usageMetadata``. After commit an upstream failure is one ``{"error": {code: 502, message,
status: "UNAVAILABLE"}}`` element, and the stream ends there.
"""

from __future__ import annotations

import math
import secrets
import time
from typing import Any

import orjson

from freellm.core.chunks import Chunk, read_chunk
from freellm.core.tokens import estimate_text_tokens
from freellm.engine.context import TurnOutcome
from freellm.errors import ClientError, Exhausted

__all__ = [
    "GeminiStreamRenderer",
    "finish_reason",
    "function_args",
    "gemini_error_body",
    "generate_content_body",
    "new_response_id",
    "status_for",
    "usage_metadata",
]

_FINISH = {
    "stop": "STOP",
    "end_turn": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "max_tokens": "MAX_TOKENS",
    "content_filter": "SAFETY",
    "safety": "SAFETY",
    "refusal": "SAFETY",
}

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "PERMISSION_DENIED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_DOMAIN = "freellm"


def new_response_id() -> str:
    return secrets.token_urlsafe(16)


def finish_reason(finish: str | None, has_tool_calls: bool) -> str:
    """Canonical finish reason → Gemini ``finishReason``: a tool turn is ``STOP`` (as Gemini does),
    ``length`` → ``MAX_TOKENS``, ``content_filter`` → ``SAFETY``, anything else ``STOP``."""
    if has_tool_calls:
        return "STOP"
    return _FINISH.get((finish or "stop").lower(), "STOP")


def function_args(arguments: str) -> dict[str, Any]:
    """A tool call's argument text as the ``args`` object: a JSON object as is (a double-encoded one is
    decoded once), any other JSON value as ``{"value": …}``, unparseable text as ``{"value": text}``."""
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return {"value": arguments}
    if isinstance(value, str):
        try:
            inner = orjson.loads(value)
        except orjson.JSONDecodeError:
            inner = None
        if isinstance(inner, dict):
            return inner
    return value if isinstance(value, dict) else {"value": value}


class _CallIds:
    """Function-call ids: the upstream's, or ``call_<16hex>_<n>`` when it gave none (the pump's
    ``call_stream_N`` placeholders repeat from turn to turn, which would confuse a client's history)."""

    def __init__(self) -> None:
        self._prefix = f"call_{secrets.token_hex(8)}"
        self._n = 0

    def __call__(self, call_id: str) -> str:
        if call_id and not call_id.startswith("call_stream_"):
            return call_id
        out = f"{self._prefix}_{self._n}"
        self._n += 1
        return out


def _int(usage: dict[str, Any] | None, *path: str) -> int | None:
    value: Any = usage
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_metadata(
    usage: dict[str, Any] | None, *, prompt_estimate: int, output_estimate: int
) -> dict[str, Any]:
    """Canonical usage → ``usageMetadata``. ``candidatesTokenCount`` excludes reasoning tokens, which
    are ``thoughtsTokenCount`` (as Gemini counts them); estimates fill what the upstream did not say."""
    prompt = _int(usage, "prompt_tokens") or prompt_estimate
    completion = _int(usage, "completion_tokens")
    if completion is None:
        completion = output_estimate
    thoughts = _int(usage, "completion_tokens_details", "reasoning_tokens") or 0
    thoughts = min(thoughts, completion)
    total = _int(usage, "total_tokens") or prompt + completion
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion - thoughts,
        "totalTokenCount": max(total, prompt + completion),
    }
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    cached = _int(usage, "prompt_tokens_details", "cached_tokens")
    if cached:
        out["cachedContentTokenCount"] = cached
    return out


def _call_part(call_id: str, name: str, arguments: str, signature: object) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"id": call_id, "name": name, "args": function_args(arguments)}}
    if isinstance(signature, str) and signature:
        part["thoughtSignature"] = signature
    return part


def _response(
    parts: list[dict[str, Any]],
    *,
    model_version: str,
    response_id: str,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    body: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        body["usageMetadata"] = usage
    body["modelVersion"] = model_version
    body["responseId"] = response_id
    return body


# ---- non-stream -------------------------------------------------------------------------------------


def generate_content_body(
    outcome: TurnOutcome,
    *,
    response_id: str,
    include_thoughts: bool,
    prompt_estimate: int,
) -> dict[str, Any]:
    """The non-stream ``GenerateContentResponse`` for a finished turn; ``modelVersion`` is the model
    that answered."""
    result = outcome.result
    ids = _CallIds()
    parts: list[dict[str, Any]] = []
    if include_thoughts and result.reasoning:
        parts.append({"text": result.reasoning, "thought": True})
    if result.text:
        parts.append({"text": result.text})
    for call in result.tool_calls:
        parts.append(
            _call_part(ids(call.id), call.name, call.arguments, getattr(call, "thought_signature", None))
        )
    if not parts:
        parts.append({"text": ""})
    usage = usage_metadata(result.usage, prompt_estimate=prompt_estimate, output_estimate=outcome.tokens_out)
    return _response(
        parts,
        model_version=outcome.attempt.route.model,
        response_id=response_id,
        finish=finish_reason(result.finish_reason, bool(result.tool_calls)),
        usage=usage,
    )


# ---- errors -----------------------------------------------------------------------------------------


def status_for(http_status: int) -> str:
    """The ``google.rpc.Code`` name Gemini pairs with an HTTP status."""
    status = _STATUS.get(http_status)
    if status is not None:
        return status
    return "INTERNAL" if http_status >= 500 else "INVALID_ARGUMENT"


def _retry_seconds(exc: ClientError | Exhausted) -> float | None:
    if isinstance(exc, Exhausted):
        if exc.retry_at_ms is None:
            return None
        return max(0.0, (exc.retry_at_ms - time.time() * 1000) / 1000)
    header = exc.headers.get("Retry-After")
    if header is not None and header.strip().isdigit():
        return float(header.strip())
    return None


def gemini_error_body(exc: ClientError | Exhausted) -> dict[str, Any]:
    """``{"error": {code, message, status, details?}}``: ``status`` from the HTTP status (so the
    exhaustion ladder's status decides it); freellm's own code as an ``ErrorInfo`` ``reason``; a
    ``RetryInfo`` (``retryDelay: "<n>s"``) when the retry time is known, which Gemini CLI honours."""
    err: dict[str, Any] = {"code": exc.status, "message": exc.message, "status": status_for(exc.status)}
    details: list[dict[str, Any]] = []
    if exc.code:
        info: dict[str, Any] = {"@type": _ERROR_INFO, "reason": exc.code.upper(), "domain": _DOMAIN}
        if isinstance(exc, Exhausted) and exc.retry_at_ms is not None:
            info["metadata"] = {"retryAtMs": str(exc.retry_at_ms)}
        details.append(info)
    retry = _retry_seconds(exc)
    if retry is not None:
        details.append({"@type": _RETRY_INFO, "retryDelay": f"{max(1, math.ceil(retry))}s"})
    if details:
        err["details"] = details
    return {"error": err}


# ---- stream -----------------------------------------------------------------------------------------


class GeminiStreamRenderer:
    """Per-request stream renderer (see the module doc). Not reusable across requests."""

    def __init__(
        self,
        *,
        sse: bool,
        model_version: str,
        response_id: str,
        include_thoughts: bool,
        prompt_estimate: int,
    ) -> None:
        self.sse = sse
        self.content_type = "text/event-stream" if sse else "application/json"
        self.model_version = model_version
        self.response_id = response_id
        self.include_thoughts = include_thoughts
        self.prompt_estimate = prompt_estimate
        self._ids = _CallIds()
        self._elements = 0
        self._closed = False
        self._finish: str | None = None
        self._tool_use = False
        self._usage: dict[str, Any] | None = None
        self._out_chars = 0

    # -- the StreamRenderer protocol ------------------------------------------------------------------

    def chunks(self, chunks: list[Chunk]) -> bytes:
        if self._closed:
            return b""
        out: list[bytes] = []
        for chunk in chunks:
            model = chunk.get("model")
            if isinstance(model, str) and model:
                self.model_version = model
            delta, finish, usage = read_chunk(chunk)
            if usage is not None:
                self._usage = usage
            if finish is not None:
                self._finish = finish
            if delta is None:
                continue
            parts = self._parts(delta)
            if parts:
                out.append(self._element(self._body(parts)))
        return b"".join(out)

    def stream_error(self, provider: str, message: str) -> bytes:
        if self._closed:
            return b""
        self._closed = True
        body = {
            "error": {
                "code": 502,
                "message": f"Provider error ({provider}): stream interrupted: {message}",
                "status": "UNAVAILABLE",
            }
        }
        return self._element(body) + self._terminator()

    def done(self) -> bytes:
        if self._closed:
            return b""
        self._closed = True
        usage = usage_metadata(
            self._usage,
            prompt_estimate=self.prompt_estimate,
            output_estimate=estimate_text_tokens(self._out_chars),
        )
        final = self._body([], finish=finish_reason(self._finish, self._tool_use), usage=usage)
        return self._element(final) + self._terminator()

    # -- framing ----------------------------------------------------------------------------------------

    def _element(self, body: dict[str, Any]) -> bytes:
        data = orjson.dumps(body)
        first = self._elements == 0
        self._elements += 1
        if self.sse:
            return b"data: " + data + b"\n\n"
        return (b"[" if first else b",\n") + data

    def _terminator(self) -> bytes:
        if self.sse:
            return b""
        return b"\n]" if self._elements else b"[]"

    def _body(
        self, parts: list[dict[str, Any]], *, finish: str | None = None, usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return _response(
            parts, model_version=self.model_version, response_id=self.response_id, finish=finish, usage=usage
        )

    # -- parts ------------------------------------------------------------------------------------------

    def _parts(self, delta: dict[str, Any]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._out_chars += len(reasoning)
            if self.include_thoughts:
                parts.append({"text": reasoning, "thought": True})
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._out_chars += len(content)
            parts.append({"text": content})
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") or {}
                name = fn.get("name") if isinstance(fn, dict) else None
                if not isinstance(name, str) or not name:
                    continue
                args = fn.get("arguments")
                arguments = args if isinstance(args, str) else "{}"
                call_id = call.get("id")
                self._out_chars += len(arguments)
                self._tool_use = True
                signature = call.get("thought_signature") or call.get("thoughtSignature")
                parts.append(
                    _call_part(
                        self._ids(call_id if isinstance(call_id, str) else ""), name, arguments, signature
                    )
                )
        return parts
