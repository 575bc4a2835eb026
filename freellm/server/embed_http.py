"""Serve one embeddings request over HTTP — what the OpenAI, Gemini and Ollama embedding routes share.

A surface parses its wire into an :class:`~freellm.core.embeddings.EmbeddingRequest` and renders the
vectors in its own shape; this runs the engine, sets the routing headers, writes the request-log row
(and counts the turn in the metrics). Refusals and exhaustion propagate as ``ClientError`` /
``Exhausted``, which the edge renders in the path's own error envelope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from freellm.core.embeddings import EmbeddingRequest
from freellm.engine.embeddings import EmbeddingTurn
from freellm.server.headers import routing_headers
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.server.turn_http import TurnScope, new_context

__all__ = ["respond_embeddings"]

RenderEmbeddings = Callable[[EmbeddingTurn], Any]


async def respond_embeddings(
    request: web.Request, req: EmbeddingRequest, *, surface: str, render: RenderEmbeddings
) -> web.Response:
    gw = request.app[GATEWAY]
    async with TurnScope(gw, new_context(request, surface), req) as scope:
        turn = await gw.engine.embed(scope.ctx, req)
        scope.outcome = turn.outcome
        settings = gw.settings
        base: dict[str, str] = request[BASE_HEADERS]
        headers = {
            **base,
            **routing_headers(
                turn.outcome.attempt.route.label,
                turn.outcome.trail,
                detail=settings.fallback.expose_detail_header,
                max_len=settings.server.header_value_max,
            ),
        }
        return web.Response(body=orjson.dumps(render(turn)), content_type="application/json", headers=headers)
    raise AssertionError("unreachable: the scope only ever re-raises")  # pragma: no cover
