"""OpenAI-compatible upstreams (Groq, Cerebras, OpenRouter, vLLM, llama.cpp, Ollama, …).

The canonical form *is* this wire, so the request body goes out as built and each ``data:`` frame is
parsed once and handed on. All I/O failures are mapped to :class:`UpstreamError` here, at the boundary:
the fallback loop only ever sees facts (status, transport, timeout, retry hint), never aiohttp types.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson

from freellm.config import ProviderConfig
from freellm.core.chunks import Chunk
from freellm.engine.failure import http_error_message, parse_retry_after
from freellm.errors import UpstreamError
from freellm.providers.base import Timeouts
from freellm.wire.sse import SSEDecoder, SSELineTooLong

__all__ = ["OpenAICompatProvider", "completion_to_chunks", "error_message_of"]

_MAX_ERROR_BODY = 64 * 1024


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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeouts.first_byte
        timeout = aiohttp.ClientTimeout(total=None, connect=timeouts.connect, sock_read=timeouts.stall)
        try:
            async with asyncio.timeout_at(deadline):
                resp = await self._session.post(
                    self._url, data=orjson.dumps(body), headers=headers, timeout=timeout
                )
        except TimeoutError as exc:
            raise UpstreamError(
                f"no first byte within {timeouts.first_byte:g}s", timeout=True
            ) from exc
        except aiohttp.ClientError as exc:
            raise transport_error(exc) from exc
        if resp.status >= 400:
            try:
                raise await _status_error(resp)
            finally:
                resp.release()
        if not stream:
            return await _read_completion(resp, deadline)
        return OpenAIStream(resp, deadline)


class OpenAIStream:
    """Async iterator over the canonical chunks of one streamed upstream answer."""

    __slots__ = ("_deadline", "_decoder", "_pending", "_resp", "saw_done")

    def __init__(self, resp: aiohttp.ClientResponse, first_byte_deadline: float) -> None:
        self._resp = resp
        self._decoder = SSEDecoder()
        self._pending: list[Chunk] = []
        self._deadline: float | None = first_byte_deadline
        self.saw_done = False

    def __aiter__(self) -> OpenAIStream:
        return self

    async def __anext__(self) -> Chunk:
        while not self._pending:
            if self.saw_done:
                raise StopAsyncIteration
            data = await self._read()
            if not data:
                self._frames(self._decoder.flush())
                if not self._pending:
                    raise StopAsyncIteration
                break
            try:
                self._frames(self._decoder.feed(data))
            except SSELineTooLong as exc:
                raise UpstreamError(f"malformed upstream stream: {exc}") from exc
        return self._pending.pop(0)

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

    async def _read(self) -> bytes:
        try:
            if self._deadline is not None:
                try:
                    async with asyncio.timeout_at(self._deadline):
                        data = await self._resp.content.readany()
                except TimeoutError as exc:
                    raise UpstreamError("no first byte: upstream sent headers, then nothing", timeout=True) from exc
                self._deadline = None
                return data
            return await self._resp.content.readany()
        except aiohttp.ServerTimeoutError as exc:
            raise UpstreamError("stream stalled: no data between reads", timeout=True) from exc
        except aiohttp.ClientError as exc:
            raise transport_error(exc, mid_stream=True) from exc

    async def aclose(self) -> None:
        self._resp.close()


class CompletionStream:
    """A non-stream answer presented as the same chunk iterator, so one pump serves both."""

    __slots__ = ("_chunks", "saw_done")

    def __init__(self, chunks: list[Chunk]) -> None:
        self._chunks = chunks
        self.saw_done = True

    def __aiter__(self) -> CompletionStream:
        return self

    async def __anext__(self) -> Chunk:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)

    async def aclose(self) -> None:
        self._chunks.clear()


async def _read_completion(resp: aiohttp.ClientResponse, deadline: float) -> CompletionStream:
    try:
        async with asyncio.timeout_at(deadline):
            raw = await resp.read()
    except TimeoutError as exc:
        raise UpstreamError("no first byte: completion body not received in time", timeout=True) from exc
    except aiohttp.ClientError as exc:
        raise transport_error(exc, mid_stream=True) from exc
    finally:
        resp.release()
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


def error_message_of(body: Any) -> str:
    """The human message inside an upstream error body, whatever shape the provider chose."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or err.get("detail")
            if isinstance(msg, str):
                return msg
            return orjson.dumps(err).decode()[:500]
        if isinstance(err, str):
            return err
    if isinstance(body, str):
        return body[:500]
    return orjson.dumps(body).decode()[:500]


async def _status_error(resp: aiohttp.ClientResponse) -> UpstreamError:
    try:
        raw = await resp.content.read(_MAX_ERROR_BODY)
    except aiohttp.ClientError:
        raw = b""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = raw.decode("utf-8", "replace").strip()
    retry_after = None
    header = resp.headers.get("Retry-After")
    if header:
        retry_after = parse_retry_after(header, time.time())
    message = error_message_of(body) or resp.reason or ""
    return UpstreamError(
        http_error_message(resp.status, message), status=resp.status, retry_after_s=retry_after, body=body
    )


def transport_error(exc: BaseException, *, mid_stream: bool = False) -> UpstreamError:
    """Map an aiohttp client failure to a retryable transport UpstreamError."""
    if mid_stream and isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamError(f"stream ended unexpectedly: {type(exc).__name__}", transport=True)
    detail = str(exc) or type(exc).__name__
    return UpstreamError(f"fetch failed: {type(exc).__name__}: {detail}", transport=True)
