"""Serve one embeddings request over HTTP — what the OpenAI, Gemini and Ollama embedding routes share.

A surface parses its wire into an :class:`~freellm.core.embeddings.EmbeddingRequest` and renders the
vectors in its own shape; this runs the engine, sets the routing headers, writes the request-log row
(and counts the turn in the metrics). Refusals and exhaustion propagate as ``ClientError`` /
``Exhausted``, which the edge renders in the path's own error envelope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from freellm.core.embeddings import EmbeddingRequest
from freellm.engine.embeddings import EmbeddingTurn
from freellm.errors import ClientError, Exhausted
from freellm.server.headers import routing_headers
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.server.turn_http import log_turn, new_context, shutting_down

__all__ = ["respond_embeddings"]

RenderEmbeddings = Callable[[EmbeddingTurn], Any]


async def respond_embeddings(
    request: web.Request, req: EmbeddingRequest, *, surface: str, render: RenderEmbeddings
) -> web.Response:
    gw = request.app[GATEWAY]
    ctx = new_context(request, surface)
    turn: EmbeddingTurn | None = None
    status = 200
    error: BaseException | None = None
    task = asyncio.current_task()
    if task is not None:
        gw.turns.add(task)
    metrics = gw.metrics
    if metrics is not None:
        metrics.inflight_inc()
    try:
        turn = await gw.engine.embed(ctx, req)
        settings = gw.settings
        served = turn.outcome.attempt.route.label
        base: dict[str, str] = request[BASE_HEADERS]
        headers = {
            **base,
            **routing_headers(
                served,
                turn.outcome.trail,
                detail=settings.fallback.expose_detail_header,
                max_len=settings.server.header_value_max,
            ),
        }
        return web.Response(body=orjson.dumps(render(turn)), content_type="application/json", headers=headers)
    except (ClientError, Exhausted) as exc:
        status, error = exc.status, exc
        raise
    except asyncio.CancelledError as exc:
        if not gw.claim_interrupt(task):
            status, error = 499, exc
            raise
        refusal = shutting_down()  # the shutdown grace ran out: answer rather than drop the connection
        status, error = refusal.status, refusal
        raise refusal from None
    finally:
        if task is not None:
            gw.turns.discard(task)
        try:
            await log_turn(gw, ctx, req, status, turn.outcome if turn is not None else None, error)
        finally:
            if metrics is not None:
                metrics.inflight_dec()
