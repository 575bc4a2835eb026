"""HTTP routes. Handlers are thin: decode, hand the canonical request to the engine, render, log."""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web

from freellm import admin
from freellm.admin import ui as dashboard
from freellm.core.request import parse_chat_request
from freellm.errors import ClientError
from freellm.fusion.http import fusion_requested, new_fusion_id, respond_fusion
from freellm.fusion.options import FUSION_MODEL
from freellm.mcp import http as mcp
from freellm.routing.availability import embedding_availability, model_availability
from freellm.routing.router import RETIRED
from freellm.server.auth import Client, key_matches
from freellm.server.body import read_json
from freellm.server.state import BASE_HEADERS, CLIENT, GATEWAY, Gateway
from freellm.server.turn_http import respond_turn
from freellm.store.base import store_health
from freellm.surfaces import (
    anthropic_messages,
    gemini,
    ollama,
    openai_completions,
    openai_embeddings,
    openai_responses,
)
from freellm.surfaces.openai_chat import ChatRenderer, FusionChatRenderer, chat_completion_body

__all__ = ["add_routes", "model_list"]

log = logging.getLogger("freellm.server")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", list_models)
    for surface in (anthropic_messages, openai_responses, openai_completions, openai_embeddings, gemini, ollama):
        surface.register(app)
    admin.register(app)
    dashboard.register(app)
    mcp.register(app)


async def health(request: web.Request) -> web.Response:
    """200 while the gateway serves; ``degraded`` (still 200) names the shared store that is unreachable:
    ``"state": "local"`` (Redis: hot state kept per process) or ``"records": "buffering"`` (PostgreSQL)."""
    gw = request.app.get(GATEWAY)
    degraded = store_health(gw.store) if gw is not None else {}
    return web.json_response({"status": "degraded", **degraded} if degraded else {"status": "ok"})


async def metrics(request: web.Request) -> web.Response:
    """The Prometheus exposition (docs/metrics.md). Open without ``auth.metrics_key``; with it, only
    ``Authorization: Bearer <metrics_key>`` (the edge lets ``/metrics`` through without a client key)."""
    gw = request.app[GATEWAY]
    exposition = gw.metrics
    if exposition is None:  # metrics.enabled: false
        raise ClientError(404, "Metrics are turned off (metrics.enabled: false).", code="not_found")
    _check_metrics_key(request, gw)
    active = await gw.store.active_cooldowns(time.time())
    cooling = sum(1 for record in active.values() if record.source != RETIRED)  # a retirement is no cooldown
    return web.Response(body=exposition.render(cooling), headers={"Content-Type": exposition.content_type})


def _check_metrics_key(request: web.Request, gw: Gateway) -> None:
    expected = gw.settings.auth.metrics_key
    if expected is None:
        return
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    ok = scheme.lower() == "bearer" and key_matches(token, [expected.encode()])
    if not ok or gw.client_keys.match(token) is not None:  # a client key is never a metrics key
        raise ClientError(
            401,
            "Invalid metrics key",
            type="authentication_error",
            code="invalid_metrics_key",
            headers={"WWW-Authenticate": "Bearer"},
        )


async def chat_completions(request: web.Request) -> web.StreamResponse:
    req = parse_chat_request(await read_json(request))
    if fusion_requested(request, req.requested_model):
        fusion_id, created = new_fusion_id(), int(time.time())
        return await respond_fusion(
            request,
            req,
            surface="chat",
            raw_options=(req.__pydantic_extra__ or {}).get("fusion"),
            options_param="fusion",
            renderer=FusionChatRenderer(fusion_id, created),
            render_completion=chat_completion_body,
            fusion_id=fusion_id,
            created=created,
        )
    return await respond_turn(
        request,
        req,
        surface="chat",
        renderer=ChatRenderer(),
        render_completion=chat_completion_body,
        cache_variant="",
    )


async def list_models(request: web.Request) -> web.Response:
    if anthropic_messages.is_anthropic_request(request):
        return anthropic_messages.list_models(request)
    if gemini.is_gemini_request(request):  # google-genai under /v1: x-goog-api-key / x-goog-api-client / ?key=
        return gemini.list_models(request)
    only_available = any(
        request.query.get(name, "").lower() in ("1", "true", "yes") for name in ("available", "connected", "ready")
    )
    body = model_list(request.app[GATEWAY], request.get(CLIENT), only_available=only_available)
    return web.json_response(body, headers=request[BASE_HEADERS])


def model_list(gw: Gateway, client: Client | None, *, only_available: bool = False) -> dict[str, Any]:
    """The OpenAI ``/v1/models`` document: ``auto``, ``fusion`` (when on), the profiles ``client`` may
    use (its bound one, else all), then every model group with its availability, then the embedding
    families (``kind: embedding``). Shared with the MCP
    ``list_models`` tool so an agent sees exactly what a client listing the models sees."""
    catalog = gw.catalog
    data: list[dict[str, Any]] = []
    max_ctx = 0
    for model in model_availability(catalog, gw.router):
        if model.available and model.context_window:
            max_ctx = max(max_ctx, model.context_window)
        data.append(
            {
                "id": model.id,
                "object": "model",
                "created": 0,
                "owned_by": "freellm",
                "context_window": model.context_window,
                "context_length": model.context_window,
                "available": model.available,
                "unavailable_reason": model.reason,
                "providers": [r.label for r in model.routes],
            }
        )
    for family in embedding_availability(catalog, gw.router):
        dims = [r.dimensions for r in family.routes if r.dimensions]
        data.append(
            {
                "id": family.id,
                "object": "model",
                "created": 0,
                "owned_by": "freellm",
                "kind": "embedding",
                "dimensions": max(dims) if dims else None,
                "available": family.available,
                "unavailable_reason": family.reason,
                "providers": [r.label for r in family.routes],
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
    bound = client.profile if client is not None else None
    profiles = [bound] if bound is not None else list(catalog.profile_chains)
    profile_entries: list[dict[str, Any]] = []
    for name in profiles:
        chain = catalog.profile_chains[name]
        entries_ctx = [r.context_window for r in chain if r.context_window and catalog.keys.get(r.provider)]
        profile_entries.append(
            {
                **auto,
                "id": f"auto:{name}",
                "context_window": max(entries_ctx) if entries_ctx else None,
                "context_length": max(entries_ctx) if entries_ctx else None,
                "available": any(catalog.keys.get(r.provider) for r in chain),
                "providers": [r.label for r in chain],
            }
        )
    fusion = [{**auto, "id": FUSION_MODEL}] if gw.settings.fusion.enabled else []
    entries = [auto, *fusion, *profile_entries, *data]
    if only_available:
        entries = [e for e in entries if e["available"]]
    return {"object": "list", "data": entries}
