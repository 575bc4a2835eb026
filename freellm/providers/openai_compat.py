"""OpenAI-compatible upstreams (Groq, Cerebras, OpenRouter, vLLM, llama.cpp, Ollama, …).

The canonical form *is* this wire, so the request body goes out as built and each ``data:`` frame is
parsed once and handed on. All I/O failures are mapped to :class:`UpstreamError` at the boundary (the
shared plumbing in :mod:`freellm.providers.http`): the fallback loop only ever sees facts (status,
transport, timeout, retry hint), never aiohttp types.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson

from freellm.config import ProviderConfig
from freellm.core.chunks import Chunk
from freellm.errors import UpstreamError
from freellm.providers.base import Timeouts
from freellm.providers.http import (
    CompletionStream,
    SSEStream,
    error_message_of,
    failed_generation_stream,
    post_json,
    read_body,
    transport_error,
)

__all__ = [
    "CompletionStream",
    "OpenAICompatProvider",
    "OpenAIStream",
    "completion_to_chunks",
    "error_message_of",
    "transport_error",
]


class OpenAICompatProvider:
    """One configured OpenAI-wire provider, sharing the app's pooled HTTP session."""

    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self.config = config
        self._session = session
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._extra_headers = dict(config.headers)

    async def open(
        self, body: dict[str, Any], key: str, *, stream: bool, timeouts: Timeouts
    ) -> OpenAIStream | CompletionStream:
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            **self._extra_headers,
        }
        try:
            resp = await post_json(
                self._session, self._url, orjson.dumps(body), headers, timeouts, stream=stream
            )
        except UpstreamError as err:
            rescued = failed_generation_stream(err, body)
            if rescued is None:
                raise
            return rescued
        if not stream:
            return await _read_completion(resp)
        return OpenAIStream(resp, timeouts.stall)


class OpenAIStream(SSEStream):
    """Async iterator over the canonical chunks of one streamed upstream answer."""

    __slots__ = ()

    def _frames(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            if payload == b"[DONE]":
                self.saw_done = True
                return
            try:
                frame = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue  # malformed frames are skipped, as every OpenAI client does
            if isinstance(frame, dict):
                self._pending.append(frame)


async def _read_completion(resp: aiohttp.ClientResponse) -> CompletionStream:
    raw = await read_body(resp)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamError("malformed upstream completion: not JSON") from exc
    if not isinstance(body, dict):
        raise UpstreamError("malformed upstream completion: not an object")
    if "error" in body and not body.get("choices"):
        raise UpstreamError(f"in-band provider error: {error_message_of(body)}", body=body)
    return CompletionStream(completion_to_chunks(body))


def completion_to_chunks(body: dict[str, Any]) -> list[Chunk]:
    """Turn a ``chat.completion`` into one canonical chunk carrying the whole turn."""
    choices = body.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    delta: dict[str, Any] = {"role": "assistant"}
    for field in ("content", "reasoning_content", "reasoning"):
        if message.get(field) is not None:
            delta[field] = message[field]
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        delta["tool_calls"] = [
            {**call, "index": i} for i, call in enumerate(calls) if isinstance(call, dict)
        ]
    chunk: Chunk = {
        "id": body.get("id") or f"chatcmpl-{int(time.time() * 1000)}",
        "object": "chat.completion.chunk",
        "created": body.get("created") or int(time.time()),
        "model": body.get("model") or "",
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}],
    }
    if body.get("usage"):
        chunk["usage"] = body["usage"]
    return [chunk]

