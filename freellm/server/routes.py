"""HTTP routes. Handlers are thin: decode, hand the canonical request to the engine, render, log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import orjson
from aiohttp import web

from freellm.core.accumulate import completion_body
from freellm.core.request import ChatRequest, parse_chat_request
from freellm.engine.context import RequestContext, TurnOutcome
from freellm.errors import ClientError, Exhausted
from freellm.server.headers import routing_headers
from freellm.server.sinks import CollectSink, StreamSink
from freellm.server.state import GATEWAY, Gateway
from freellm.store.base import RequestLogRow
from freellm.surfaces.openai_chat import ChatRenderer

__all__ = ["add_routes", "read_json"]

log = logging.getLogger("freellm.server")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health", health)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", list_models)


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def read_json(request: web.Request) -> Any:
    """Read and decode the body: 413 past the size limit, 400 when it is not JSON."""
    raw = await request.read()
    if not raw:
        raise ClientError(400, "Request body is empty; expected a JSON object.")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientError(400, f"Malformed JSON body: {exc}") from None


def _context(request: web.Request, surface: str) -> RequestContext:
    return RequestContext(
        request_id=request["request_id"],
        surface=surface,
        started=asyncio.get_running_loop().time(),
        started_wall=time.time(),
    )


async def chat_completions(request: web.Request) -> web.StreamResponse:
    gw = request.app[GATEWAY]
    req = parse_chat_request(await read_json(request))
    ctx = _context(request, "chat")
    base_headers: dict[str, str] = {**request["base_headers"], "X-FreeLLM-Compress": "off; saved~=0"}
    settings = gw.settings
    outcome: TurnOutcome | None = None
    status = 200
    error: BaseException | None = None
    try:
        if req.stream:
            sink = StreamSink(
                request,
                ChatRenderer(),
                base_headers,
                detail_header=settings.fallback.expose_detail_header,
                header_max=settings.server.header_value_max,
            )
            try:
                outcome = await gw.engine.run_turn(ctx, req, sink)
            except asyncio.CancelledError:
                if sink.committed and gw.shutting_down:
                    with contextlib.suppress(Exception):
                        await sink.response.write(  # type: ignore[union-attr]
                            ChatRenderer().stream_error("freellm", "gateway shutting down")
                        )
                raise
            assert sink.response is not None
            return sink.response
        outcome = await gw.engine.run_turn(ctx, req, CollectSink())
        body = completion_body(
            outcome.result,
            outcome.attempt.route.model,
            usage_fallback={
                "prompt_tokens": outcome.tokens_in,
                "completion_tokens": outcome.tokens_out,
                "total_tokens": outcome.tokens_in + outcome.tokens_out,
            },
        )
        headers = {
            **base_headers,
            "X-FreeLLM-Cache": "OFF",
            **routing_headers(
                outcome.attempt.route.label,
                outcome.trail,
                detail=settings.fallback.expose_detail_header,
                max_len=settings.server.header_value_max,
            ),
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json", headers=headers)
    except (ClientError, Exhausted) as exc:
        status, error = exc.status, exc
        raise
    except asyncio.CancelledError as exc:
        status, error = 499, exc
        raise
    finally:
        await _log(gw, ctx, req, status, outcome, error)


async def _log(
    gw: Gateway,
    ctx: RequestContext,
    req: ChatRequest,
    status: int,
    outcome: TurnOutcome | None,
    error: BaseException | None,
) -> None:
    trail = outcome.trail if outcome is not None else getattr(error, "trail", [])
    if outcome is not None and outcome.committed_error is not None:
        result = "error"
    elif isinstance(error, asyncio.CancelledError):
        result = "canceled"
    elif error is not None:
        result = "error"
    else:
        result = "success"
    row = RequestLogRow(
        request_id=ctx.request_id,
        ts=ctx.started_wall,
        surface=ctx.surface,
        requested_model=req.requested_model,
        route=outcome.attempt.route.label if outcome is not None else None,
        status=status,
        stream=req.stream,
        attempts=len(trail) + (1 if outcome is not None else 0),
        latency_ms=int((asyncio.get_running_loop().time() - ctx.started) * 1000),
        ttfb_ms=outcome.ttfb_ms if outcome is not None else None,
        tokens_in=outcome.tokens_in if outcome is not None else 0,
        tokens_out=outcome.tokens_out if outcome is not None else 0,
        error_class=trail[-1].error_class if trail and result != "success" else None,
        outcome=result,
    )
    try:
        await gw.store.log_request(row)
    except Exception:  # the log must never break a reply
        log.exception("could not write the request log row for %s", ctx.request_id)


async def list_models(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    only_available = request.query.get("available", request.query.get("ready", "")).lower() in ("1", "true", "yes")
    catalog = gw.catalog
    data: list[dict[str, Any]] = []
    max_ctx = 0
    for routes in catalog.groups.values():
        providers = [r for r in routes if r.enabled]
        keyed = [r for r in providers if catalog.keys.get(r.provider)]
        contexts = [r.context_window for r in routes if r.context_window]
        ctx_window = max(contexts) if contexts else None
        available = bool(keyed)
        if available and ctx_window:
            max_ctx = max(max_ctx, ctx_window)
        reason = None if available else ("disabled" if not providers else "no_key")
        data.append(
            {
                "id": routes[0].model,
                "object": "model",
                "created": 0,
                "owned_by": "freellm",
                "context_window": ctx_window,
                "context_length": ctx_window,
                "available": available,
                "unavailable_reason": reason,
                "providers": [r.label for r in routes],
            }
        )
    auto = {
        "id": "auto",
        "object": "model",
        "created": 0,
        "owned_by": "freellm",
        "context_window": max_ctx or None,
        "context_length": max_ctx or None,
        "available": any(catalog.keys.get(r.provider) for r in catalog.chain),
        "unavailable_reason": None,
        "providers": [r.label for r in catalog.chain],
    }
    entries = [auto, *data]
    if only_available:
        entries = [e for e in entries if e["available"]]
    return web.json_response({"object": "list", "data": entries}, headers=request["base_headers"])
