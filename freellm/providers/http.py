"""HTTP plumbing shared by every provider wire: one POST, the first-byte deadline, error bodies, SSE reads.

Every provider maps I/O failures the same way, so the fallback loop sees the same facts whatever the wire:

* the request must be answered (status and headers) within ``timeouts.first_byte``, else
  ``UpstreamError(timeout)``; a non-stream body must arrive within that deadline too;
* once a stream's headers arrived, every read may be silent for at most ``timeouts.stall`` (an
  upstream that sends headers and then nothing is a stalled stream);
* aiohttp client errors become transport ``UpstreamError`` s (:func:`transport_error`);
* an HTTP status ≥ 400 becomes ``UpstreamError(status=…, retry_after_s=…, body=…)`` worded by
  :func:`~freellm.engine.failure.http_error_message`, which the classifier relies on — except a 400
  whose body carries a ``failed_generation`` the tool rescue can parse (Groq's ``tool_use_failed``),
  which :func:`failed_generation_stream` turns into a synthetic success.

A wire supplies only what differs: the URL, headers and body, how an error body is worded
(``message_of``), and how SSE ``data:`` payloads become canonical chunks (:meth:`SSEStream._frames`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import orjson

from freellm.core.chunks import Chunk, make_chunk
from freellm.engine.failure import http_error_message, parse_retry_after
from freellm.engine.tools.rescue import rescue_inline_tool_calls
from freellm.errors import UpstreamError
from freellm.providers.base import Timeouts
from freellm.wire.sse import SSEDecoder, SSELineTooLong

__all__ = [
    "MAX_ERROR_BODY",
    "CompletionStream",
    "SSEStream",
    "error_message_of",
    "failed_generation_stream",
    "post_json",
    "probe_status",
    "read_body",
    "status_error",
    "transport_error",
]

MAX_ERROR_BODY = 64 * 1024
"""At most this much of an error body is read (and kept for the classifier)."""

MessageOf = Callable[[Any], str]


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


def transport_error(exc: BaseException, *, mid_stream: bool = False) -> UpstreamError:
    """Map an aiohttp client failure to a retryable transport UpstreamError."""
    if mid_stream and isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamError(f"stream ended unexpectedly: {type(exc).__name__}", transport=True)
    detail = str(exc) or type(exc).__name__
    return UpstreamError(f"fetch failed: {type(exc).__name__}: {detail}", transport=True)


async def post_json(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    headers: Mapping[str, str],
    timeouts: Timeouts,
    *,
    stream: bool,
    message_of: MessageOf = error_message_of,
) -> aiohttp.ClientResponse:
    """POST ``payload``; return the 2xx response.

    The timeouts are aiohttp's own (no extra timer task per request): a non-stream answer must arrive
    whole within ``first_byte`` (``total``); a stream's headers within ``first_byte`` (``sock_read``,
    switched to the stall limit by :class:`SSEStream` once the headers are in). Raises
    :class:`UpstreamError` for a first-byte timeout, a transport failure or a status ≥ 400 (the error
    body is read, worded with ``message_of`` and the response released).
    """
    if stream:
        timeout = aiohttp.ClientTimeout(total=None, connect=timeouts.connect, sock_read=timeouts.first_byte)
    else:
        timeout = aiohttp.ClientTimeout(total=timeouts.first_byte, connect=timeouts.connect)
    try:
        resp = await session.post(url, data=payload, headers=dict(headers), timeout=timeout)
    except TimeoutError as exc:
        raise UpstreamError(f"no first byte within {timeouts.first_byte:g}s", timeout=True) from exc
    except aiohttp.ClientError as exc:
        raise transport_error(exc) from exc
    if resp.status >= 400:
        try:
            raise await status_error(resp, message_of)
        finally:
            resp.release()
    return resp


async def probe_status(
    session: aiohttp.ClientSession, url: str, headers: Mapping[str, str], timeout_s: float
) -> int | None:
    """``GET url`` for a key check: the HTTP status, or None when the request did not get an answer
    (refused, reset, timed out). The body is never read beyond what aiohttp buffers."""
    try:
        async with session.get(url, headers=dict(headers), timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            return resp.status
    except (aiohttp.ClientError, TimeoutError):
        return None


async def status_error(
    resp: aiohttp.ClientResponse, message_of: MessageOf = error_message_of
) -> UpstreamError:
    """The :class:`UpstreamError` for an HTTP error answer: status, ``Retry-After`` and decoded body."""
    try:
        raw = await resp.content.read(MAX_ERROR_BODY)
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
    message = message_of(body) or resp.reason or ""
    return UpstreamError(
        http_error_message(resp.status, message),
        status=resp.status,
        retry_after_s=retry_after,
        body=body,
        headers=resp.headers,
    )


async def read_body(resp: aiohttp.ClientResponse) -> bytes:
    """The whole (non-stream) body, due within the request's first-byte ``total``; the response is released."""
    try:
        return await resp.read()
    except TimeoutError as exc:
        raise UpstreamError("no first byte: completion body not received in time", timeout=True) from exc
    except aiohttp.ClientError as exc:
        raise transport_error(exc, mid_stream=True) from exc
    finally:
        resp.release()


class SSEStream:
    """Async iterator over the canonical chunks of one streamed upstream answer.

    Reads the socket (aiohttp enforces the stall limit between reads), feeds the SSE decoder, and hands ``data:`` payloads to :meth:`_frames`, which a wire overrides to append
    canonical chunks to ``_pending`` (and set ``saw_done`` at the wire's end marker). A wire whose
    stream can carry an error event sets ``_error`` instead of raising: the chunks decoded before it in
    the same read are handed out first, then the error is raised.
    """

    __slots__ = ("_decoder", "_error", "_pending", "_resp", "_stall", "headers", "saw_done")

    def __init__(self, resp: aiohttp.ClientResponse, stall_s: float) -> None:
        self._resp = resp
        self.headers: Mapping[str, str] | None = resp.headers
        self._stall = stall_s
        # The headers are in: from now on the limit is the silence between reads. aiohttp's own read
        # timer (re-armed on every received packet) enforces it, so the per-chunk path has no timer work.
        conn = resp.connection
        protocol = conn.protocol if conn is not None else None
        if protocol is not None:
            protocol.read_timeout = stall_s
            protocol.start_timeout()
        self._decoder = SSEDecoder()
        self._pending: list[Chunk] = []
        self._error: UpstreamError | None = None
        self.saw_done = False

    @property
    def buffered(self) -> bool:
        return bool(self._pending)

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> Chunk:
        while not self._pending:
            if self._error is not None:
                raise self._error
            if self.saw_done:
                raise StopAsyncIteration
            data = await self._read()
            if not data:
                self._frames(self._decoder.flush())
                if not self.saw_done and self._error is None:
                    self._eof()
                if not self._pending:
                    raise StopAsyncIteration
                break
            try:
                self._frames(self._decoder.feed(data))
            except SSELineTooLong as exc:
                raise UpstreamError(f"malformed upstream stream: {exc}") from exc
        return self._pending.pop(0)

    def _frames(self, payloads: list[bytes]) -> None:
        """Turn ``data:`` payloads into chunks on ``_pending``; set ``saw_done`` at the end marker."""
        raise NotImplementedError

    def _eof(self) -> None:
        """The connection ended without the wire's end marker; a wire may flush buffered chunks here."""

    async def _read(self) -> bytes:
        try:
            return await self._resp.content.readany()
        except aiohttp.ServerTimeoutError as exc:
            raise UpstreamError(f"stream stalled: no data for {self._stall:g}s", timeout=True) from exc
        except aiohttp.ClientError as exc:
            raise transport_error(exc, mid_stream=True) from exc

    def whole(self) -> None:
        return None

    async def aclose(self) -> None:
        self._resp.close()


class CompletionStream:
    """A non-stream answer presented as the same chunk iterator, so one pump serves both."""

    __slots__ = ("_chunks", "headers", "saw_done")

    def __init__(self, chunks: list[Chunk], headers: Mapping[str, str] | None = None) -> None:
        self._chunks = chunks
        self.headers = headers
        self.saw_done = True

    @property
    def buffered(self) -> bool:
        return bool(self._chunks)

    def __aiter__(self) -> CompletionStream:
        return self

    async def __anext__(self) -> Chunk:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)

    def whole(self) -> list[Chunk]:
        chunks, self._chunks = self._chunks, []
        return chunks

    async def aclose(self) -> None:
        self._chunks.clear()


def _declared_tools(tools: Any) -> dict[str, dict[str, Any]]:
    """Tool name → parameters schema, from an OpenAI-shaped upstream body's ``tools``."""
    out: dict[str, dict[str, Any]] = {}
    if isinstance(tools, list):
        for tool in tools:
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                params = fn.get("parameters")
                out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def failed_generation_stream(err: UpstreamError, body: Mapping[str, Any]) -> CompletionStream | None:
    """Rescue a 400 ``failed_generation`` (Groq ``tool_use_failed``) into a synthetic success.

    The provider refused its own model's tool call because it was written in a dialect; the raw text is
    in ``error.failed_generation``. It goes through the same parser as an inline dialect in a stream,
    with the tools of the ``body`` that was sent upstream. Returns the answer as chunks (role and any
    leftover text, the calls, a ``tool_calls`` finish) for the pump — which repairs and, if configured,
    validates the arguments like any other call — or None when there is nothing to rescue (the caller
    raises ``err``).
    """
    if err.status != 400 or not isinstance(err.body, dict):
        return None
    error = err.body.get("error")
    text = error.get("failed_generation") if isinstance(error, dict) else None
    if not isinstance(text, str) or not text.strip():
        return None
    schemas = _declared_tools(body.get("tools"))
    if not schemas:
        return None
    rescue = rescue_inline_tool_calls(text, schemas)
    if not rescue.calls:
        return None
    cid, created = f"chatcmpl-{int(time.time() * 1000)}", int(time.time())
    model = body.get("model")
    model = model if isinstance(model, str) else ""
    delta: dict[str, Any] = {"role": "assistant"}
    if rescue.clean_text:
        delta["content"] = rescue.clean_text
    delta["tool_calls"] = [call.as_delta(i) for i, call in enumerate(rescue.calls)]
    return CompletionStream([make_chunk(cid, created, model, delta), make_chunk(cid, created, model, {}, "tool_calls")])
