"""Sinks connect an attempt's output to the HTTP response.

:class:`StreamSink` holds the response headers back until the pump's first real payload (the commit
point) and then writes each batch of frames as soon as it has it. The non-stream sink is
:class:`~freellm.engine.context.CollectSink`.

A client that vanishes is normally noticed by aiohttp, which cancels the handler. When a write gets
there first (the transport is already closing), :class:`StreamSink` turns the connection reset into
the same cancellation, so the engine takes its one client-gone path: upstream closed, lease released,
nothing booked, the request logged as canceled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

from freellm.cache.recorder import StreamRecorder
from freellm.core.chunks import Chunk
from freellm.engine.context import Attempt, TurnOutcome
from freellm.server.headers import routing_headers

__all__ = ["STREAM_HEADERS", "StreamRenderer", "StreamSink", "to_client"]

STREAM_HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
"""Sent with every stream (a cache replay included): no proxy buffering or caching of the frames."""


class StreamRenderer(Protocol):
    content_type: str

    def chunks(self, chunks: list[Chunk]) -> bytes: ...

    def stream_error(self, provider: str, message: str) -> bytes: ...

    def done(self) -> bytes: ...


class StreamSink:
    streaming = True

    def __init__(
        self,
        request: web.Request,
        renderer: StreamRenderer,
        base_headers: dict[str, str],
        *,
        detail_header: bool,
        header_max: int,
        recorder: StreamRecorder | None = None,
        commit_headers: Callable[[str], dict[str, str]] | None = None,
        before_end: Callable[[TurnOutcome], Awaitable[None]] | None = None,
    ) -> None:
        """``recorder``: only for a request the cache may store; it sees every byte written.
        ``commit_headers``: more headers for the route that commits (its label), e.g. the session's.
        ``before_end``: awaited after the terminator is rendered (and recorded) but before it is
        written — the client can send its next request only once it has it, so what that request may
        need (stored response, session, cache entry) is written there, visible to every replica."""
        self._request = request
        self._recorder = recorder
        self._before_end = before_end
        self._commit_headers = commit_headers
        self._renderer = renderer
        self._base_headers = base_headers
        self._detail = detail_header
        self._header_max = header_max
        self.response: web.StreamResponse | None = None
        self.committed = False

    async def _commit(self, attempt: Attempt) -> web.StreamResponse:
        headers = {
            **self._base_headers,
            "Content-Type": self._renderer.content_type,
            **STREAM_HEADERS,
            **routing_headers(attempt.route.label, attempt.trail, detail=self._detail, max_len=self._header_max),
        }
        if self._commit_headers is not None:
            headers.update(self._commit_headers(attempt.route.label))
        response = web.StreamResponse(status=200, headers=headers)
        self.committed = True
        await to_client(response.prepare(self._request))
        self.response = response
        return response

    async def send(self, attempt: Attempt, chunks: list[Chunk]) -> None:
        response = self.response or await self._commit(attempt)
        data = self._renderer.chunks(chunks)
        if self._recorder is not None:
            self._recorder.chunks(chunks, data)
        await to_client(response.write(data))

    async def fail(self, attempt: Attempt, message: str) -> None:
        response = self.response or await self._commit(attempt)
        if self._recorder is not None:
            self._recorder.fail()
        await to_client(response.write(self._renderer.stream_error(attempt.route.provider, message)))

    async def end(self, outcome: TurnOutcome) -> None:
        if self.response is not None:
            data = self._renderer.done()
            if self._recorder is not None:
                self._recorder.end(data)
            if self._before_end is not None:
                await self._before_end(outcome)
            await to_client(self.response.write(data))


async def to_client(io: Awaitable[object]) -> None:
    """Await one write to the client; a reset connection means the client is gone (see module doc)."""
    try:
        await io
    except ConnectionResetError as exc:
        raise asyncio.CancelledError("client disconnected") from exc
