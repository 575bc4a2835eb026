"""Ollama's embedding routes: ``POST /api/embed`` and the legacy ``POST /api/embeddings``.

``/api/embed {model, input: str | [str], dimensions?}`` answers ``{model, embeddings, total_duration,
load_duration, prompt_eval_count}``; the legacy route takes one ``prompt`` and answers ``{embedding}``.
The model name routes as on ``/v1/embeddings`` (a family, or a pin), with Ollama's ``:latest`` tag
stripped and an empty name meaning ``auto``. No input at all is Ollama's "load the model" call:
answered empty, with no upstream call. ``truncate``, ``options`` and ``keep_alive`` are about a local
runtime and are accepted and ignored.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from freellm.core.embeddings import EmbeddingRequest
from freellm.engine.embeddings import EmbeddingTurn
from freellm.errors import ClientError
from freellm.server.body import read_json
from freellm.server.embed_http import respond_embeddings
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.surfaces.ollama.mapping import model_name, requested_route
from freellm.surfaces.ollama.wire import EmbedBody, LegacyEmbeddingsBody, parse_body

__all__ = ["embed", "legacy_embeddings"]


def _inputs(body: EmbedBody) -> list[str]:
    value = body.input if body.input is not None else body.prompt
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if any(not item for item in items):
        raise ClientError(400, "invalid request: input must not contain empty strings")
    return items


def _empty(request: web.Request, body: dict[str, Any]) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json", headers=request[BASE_HEADERS])


async def embed(request: web.Request) -> web.Response:
    body = parse_body(EmbedBody, await read_json(request))
    name = model_name(body.model)
    inputs = _inputs(body)
    if not inputs:  # a load call
        return _empty(request, {"model": name, "embeddings": [], "total_duration": 0, "load_duration": 0})
    max_inputs = request.app[GATEWAY].settings.embeddings.max_inputs
    if len(inputs) > max_inputs:
        raise ClientError(400, f"invalid request: input may hold at most {max_inputs} items")
    req = EmbeddingRequest(requested_route(body.model), tuple(inputs), dimensions=body.dimensions)
    started = time.monotonic_ns()

    def render(turn: EmbeddingTurn) -> dict[str, Any]:
        return {
            "model": name,
            "embeddings": turn.answer.vectors,
            "total_duration": max(1, time.monotonic_ns() - started),
            "load_duration": 0,
            "prompt_eval_count": turn.outcome.tokens_in,
        }

    return await respond_embeddings(request, req, surface="ollama-embed", render=render)


async def legacy_embeddings(request: web.Request) -> web.Response:
    body = parse_body(LegacyEmbeddingsBody, await read_json(request))
    if not body.prompt:  # Ollama answers an empty prompt with an empty vector
        return _empty(request, {"embedding": []})
    req = EmbeddingRequest(requested_route(body.model), (body.prompt,))
    return await respond_embeddings(
        request, req, surface="ollama-embed", render=lambda turn: {"embedding": turn.answer.vectors[0]}
    )
