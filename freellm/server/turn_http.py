"""Serve one canonical turn over HTTP — the part every surface's handler shares.

A surface parses its wire into a :class:`ChatRequest`, then calls :func:`respond_turn` with a stream
renderer (its frames) and a completion renderer (its non-stream body). This function runs the
pre-routing pipeline (a cache hit is replayed here and ends the turn), picks the sink, runs the engine,
sets the routing and pipeline headers, stores a complete answer in the cache, writes the request-log
row (and counts the turn in the metrics), and on shutdown ends a committed stream with an in-band error
instead of a silent cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from freellm.cache.recorder import StreamRecorder
from freellm.cache.store import CachedReply
from freellm.core.embeddings import EmbeddingRequest
from freellm.core.messages import UserMessage
from freellm.core.request import ChatRequest
from freellm.engine.context import CollectSink, RequestContext, TurnOutcome
from freellm.engine.pipeline import Draft, Replay
from freellm.errors import ClientError, Exhausted
from freellm.server.headers import routing_headers
from freellm.server.sinks import STREAM_HEADERS, StreamRenderer, StreamSink
from freellm.server.state import BASE_HEADERS, CLIENT, GATEWAY, REQUEST_ID, Gateway
from freellm.store.base import RequestLogRow

__all__ = ["TurnScope", "counted_request", "log_turn", "new_context", "respond_turn", "shutting_down"]

log = logging.getLogger("freellm.server")

CompletionRenderer = Callable[[TurnOutcome], dict[str, Any]]
OnComplete = Callable[[TurnOutcome], Awaitable[None]]


def new_context(
    request: web.Request, surface: str, *, cache_variant: str | None = None, compressible: bool = False
) -> RequestContext:
    headers = request.headers
    client = request.get(CLIENT)
    return RequestContext(
        request_id=request[REQUEST_ID],
        surface=surface,
        started=asyncio.get_running_loop().time(),
        started_wall=time.time(),
        cache_variant=cache_variant,
        compressible=compressible,
        cache_header=headers.get("X-FreeLLM-Cache"),
        cache_control=headers.get("Cache-Control"),
        compress_header=headers.get("X-FreeLLM-Compress"),
        client_id=client.key_id if client is not None else None,
        bound_profile=client.profile if client is not None else None,
        session_header=headers.get("X-Session-Id"),
    )


async def counted_request(request: web.Request, req: ChatRequest, surface: str) -> ChatRequest:
    """A count-tokens route's request after compression and the profile's system prompt — what the
    count must reflect — with the ``X-FreeLLM-Compress`` header set on the reply (nothing is recorded in
    the compression stats)."""
    gw = request.app[GATEWAY]
    ctx = new_context(request, surface, compressible=True)
    ctx.counting = True
    try:
        return await gw.engine.counted_request(ctx, req)
    finally:
        request[BASE_HEADERS].update(ctx.pipeline_headers())


async def respond_turn(
    request: web.Request,
    req: ChatRequest,
    *,
    surface: str,
    renderer: StreamRenderer,
    render_completion: CompletionRenderer,
    headers: dict[str, str] | None = None,
    on_complete: OnComplete | None = None,
    cache_variant: str | None = None,
    compressible: bool = True,
    output_limit_asked: bool | None = None,
) -> web.StreamResponse:
    """``cache_variant``: what besides the canonical request changes this surface's bytes; None keeps
    the request out of the cache. ``compressible``: the compression stage may rewrite the messages.
    ``output_limit_asked``: False when ``max_tokens`` is the surface's own default, not the client's."""
    gw = request.app[GATEWAY]
    ctx = new_context(request, surface, cache_variant=cache_variant, compressible=compressible)
    ctx.output_limit_asked = output_limit_asked
    settings = gw.settings
    edge_headers: dict[str, str] = request[BASE_HEADERS]
    detail = settings.fallback.expose_detail_header
    header_max = settings.server.header_value_max
    async with TurnScope(gw, ctx, req) as scope:
        try:
            prepared = await gw.engine.prepare(ctx, req)
        finally:
            # The edge renders refusals with these too (a 422 after compression still says so).
            edge_headers.update(ctx.pipeline_headers())
        base_headers = {**edge_headers, **(headers or {})}
        if isinstance(prepared, Replay):
            scope.extra = {"tokens_saved": prepared.reply.tokens}  # what the hit saved, for the analytics
            return await _replay(request, prepared.reply, base_headers)
        req = scope.req = prepared.req
        if req.stream:
            recorder = StreamRecorder(settings.cache.stream_max_bytes) if ctx.cache_key is not None else None

            async def before_end(done: TurnOutcome) -> None:
                # Before the terminator: the client's next request may land on any replica. The success's
                # booking and the session write go to a shared store together (one round trip).
                async with gw.store.batch():
                    if done.attempt.settle is not None:
                        await done.attempt.settle(done)
                    await _after_turn(gw, ctx, prepared, done)
                if on_complete is not None:
                    await on_complete(done)
                if recorder is not None:
                    await _store_stream(gw, ctx, recorder, renderer.content_type, done)

            sink = StreamSink(
                request,
                renderer,
                base_headers,
                detail_header=detail,
                header_max=header_max,
                recorder=recorder,
                commit_headers=ctx.session_reply_header,
                before_end=before_end,
            )
            try:
                scope.outcome = await gw.engine.run_turn(ctx, prepared, sink)
            except asyncio.CancelledError:
                if sink.response is None or not gw.claim_interrupt(scope.task):
                    raise
                # The shutdown grace ran out mid-stream: end it in-band, never cut it.
                scope.error = shutting_down()
                with contextlib.suppress(Exception):
                    await sink.response.write(renderer.stream_error("freellm", scope.error.message))
                    await sink.response.write(renderer.done())
                return sink.response
            assert sink.response is not None
            return sink.response
        async with gw.store.batch():  # the success's booking and the session write: one round trip
            outcome = scope.outcome = await gw.engine.run_turn(ctx, prepared, CollectSink())
            await _after_turn(gw, ctx, prepared, outcome)
        body = orjson.dumps(render_completion(outcome))
        if on_complete is not None:
            await on_complete(outcome)
        if ctx.cache_key is not None:
            await _store_json(gw, ctx, body, outcome)
        served = outcome.attempt.route.label
        reply_headers = {
            **base_headers,
            **routing_headers(served, outcome.trail, detail=detail, max_len=header_max),
            **ctx.session_reply_header(served),
        }
        return web.Response(body=body, content_type=_JSON, headers=reply_headers)
    raise AssertionError("unreachable: the scope only ever re-raises")  # pragma: no cover


class TurnScope:
    """A turn's bookkeeping around its handler, the same for every kind of turn: tracked for the shutdown
    grace, counted in flight, and logged exactly once however it ends — served, refused, exhausted, the
    client gone (499), a failure of our own (500), or the shutdown grace running out before anything was
    sent (then the handler answers 503 rather than drop the connection).

    The handler sets ``outcome`` (what the log row reads), ``req`` when it routed a changed request,
    ``extra`` for the row, and ``error`` when it ended the turn in-band itself."""

    def __init__(self, gw: Gateway, ctx: RequestContext, req: ChatRequest | EmbeddingRequest) -> None:
        self.gw = gw
        self.ctx = ctx
        self.req = req
        self.outcome: TurnOutcome | None = None
        self.error: ClientError | None = None
        self.extra: dict[str, object] | None = None
        self.task = asyncio.current_task()

    async def __aenter__(self) -> TurnScope:
        if self.task is not None:
            self.gw.turns.add(self.task)
        if self.gw.metrics is not None:
            self.gw.metrics.inflight_inc()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        gw = self.gw
        status, refusal = 200, None
        error: BaseException | None = self.error
        if isinstance(exc, ClientError | Exhausted):
            status, error = exc.status, exc
        elif isinstance(exc, asyncio.CancelledError):
            if gw.claim_interrupt(self.task):
                refusal = shutting_down()
                status, error = refusal.status, refusal
            else:
                status, error = 499, exc
        elif exc is not None:
            status, error = 500, exc
        if self.task is not None:
            gw.turns.discard(self.task)
        try:
            await log_turn(gw, self.ctx, self.req, status, self.outcome, error, extra=self.extra)
        finally:
            if gw.metrics is not None:  # after the row: a scrape at 0 in flight has counted every turn
                gw.metrics.inflight_dec()
        if refusal is not None:
            raise refusal from None


_JSON = "application/json"


async def _after_turn(gw: Gateway, ctx: RequestContext, draft: Draft, outcome: TurnOutcome) -> None:
    """The pipeline's memory of a success (sessions). A failure here is logged, never the client's."""
    try:
        await gw.engine.after_turn(ctx, draft, outcome)
    except Exception:
        log.exception("could not record the session of %s", ctx.request_id)


async def _replay(request: web.Request, reply: CachedReply, base_headers: dict[str, str]) -> web.StreamResponse:
    """A cache hit: the stored bytes, verbatim — a JSON body, or the whole stream through its terminator."""
    headers = {**base_headers, "X-Routed-Via": "cache"}
    if reply.kind == "json":
        return web.Response(body=reply.body, content_type=reply.content_type, headers=headers)
    response = web.StreamResponse(
        status=200, headers={**headers, "Content-Type": reply.content_type, **STREAM_HEADERS}
    )
    await response.prepare(request)
    with contextlib.suppress(ConnectionResetError):  # the client left: nothing else to do
        await response.write(reply.body)
    return response


async def _store_json(gw: Gateway, ctx: RequestContext, body: bytes, outcome: TurnOutcome) -> None:
    """Store a complete non-stream answer (never a ``length``-truncated one) under the turn's cache key."""
    if ctx.cache_key is None or outcome.result.finish_reason == "length":
        return
    await gw.cache.put(
        ctx.cache_key,
        "json",
        body,
        content_type=_JSON,
        tokens=outcome.tokens_in + outcome.tokens_out,
        route=outcome.attempt.route.label,
    )


async def _store_stream(
    gw: Gateway, ctx: RequestContext, recorder: StreamRecorder, content_type: str, outcome: TurnOutcome
) -> None:
    """Store a complete stream: terminated, no in-band error, not truncated, within the byte ceiling."""
    if ctx.cache_key is None or not recorder.storable or outcome.committed_error is not None:
        return
    await gw.cache.put(
        ctx.cache_key,
        "stream",
        recorder.payload(),
        content_type=content_type,
        tokens=outcome.tokens_in + outcome.tokens_out,
        route=outcome.attempt.route.label,
    )


def shutting_down() -> ClientError:
    return ClientError(
        503, "The gateway is shutting down; retry the request.", type="service_unavailable", code="shutting_down"
    )


async def log_turn(
    gw: Gateway,
    ctx: RequestContext,
    req: ChatRequest | EmbeddingRequest,
    status: int,
    outcome: TurnOutcome | None,
    error: BaseException | None,
    *,
    route: str | None = None,
    extra: dict[str, object] | None = None,
) -> None:
    """Write the request-log row of one turn (``route``/``extra``: what a fusion turn says instead of
    its outcome's route, and adds). A failed write is logged, never the client's problem."""
    trail = outcome.trail if outcome is not None else getattr(error, "trail", [])
    if isinstance(error, asyncio.CancelledError):
        result = "canceled"
    elif error is not None or (outcome is not None and outcome.committed_error is not None):
        result = "error"
    else:
        result = "success"
    row = RequestLogRow(
        request_id=ctx.request_id,
        ts=ctx.started_wall,
        surface=ctx.surface,
        requested_model=req.requested_model,
        route=route
        or (outcome.attempt.route.label if outcome is not None else ("cache" if ctx.cache_status == "HIT" else None)),
        status=status,
        stream=req.stream,
        attempts=len(trail) + (1 if outcome is not None else 0),
        latency_ms=int((asyncio.get_running_loop().time() - ctx.started) * 1000),
        ttfb_ms=outcome.ttfb_ms if outcome is not None else None,
        tokens_in=outcome.tokens_in if outcome is not None else 0,
        tokens_out=outcome.tokens_out if outcome is not None else 0,
        error_class=trail[-1].error_class if trail and result != "success" else None,
        outcome=result,
        extra={**ctx.log_extra(), **(extra or {})},
    )
    if outcome is not None and outcome.continued_from is not None:
        row.extra["continued_from"] = outcome.continued_from
        row.extra["continued_on"] = outcome.attempt.route.label
    if trail:  # the routes that failed on the way: what the routing statistics are seeded from
        row.extra["failed"] = [f"{e.provider}/{e.model}" for e in trail]
    kept = gw.settings.logging
    if kept.bodies:  # off by default: then nothing of a body is ever stored
        row.extra["bodies"] = {
            "request": _capped(
                req.first_text() if isinstance(req, EmbeddingRequest) else _last_user_text(req), kept.body_max_bytes
            ),
            "response": _capped(outcome.result.text, kept.body_max_bytes) if outcome is not None else None,
        }
    if gw.metrics is not None:
        try:
            gw.metrics.observe_turn(row, trail, ctx.cache_status)
        except Exception:  # nor must the metrics
            log.exception("could not count the metrics of %s", ctx.request_id)
    try:
        await gw.store.log_request(row)
    except Exception:  # the log must never break a reply
        log.exception("could not write the request log row for %s", ctx.request_id)


def _last_user_text(req: ChatRequest) -> str:
    """The text of the request's last user message (its text parts joined by newlines), or ""."""
    for message in reversed(req.messages):
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                return content
            return "\n".join(p["text"] for p in content if isinstance(p.get("text"), str))
    return ""


def _capped(text: str, max_bytes: int) -> str:
    """``text`` cut to ``max_bytes`` bytes of UTF-8, on a character boundary."""
    if len(text) * 4 <= max_bytes:  # no character takes more than 4 bytes
        return text
    return text.encode("utf-8", "replace")[:max_bytes].decode("utf-8", "ignore")
