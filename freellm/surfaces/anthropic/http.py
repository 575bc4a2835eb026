"""HTTP handlers of the Anthropic surface: ``POST /v1/messages``, ``POST /v1/messages/count_tokens`` and
the Anthropic-shaped ``GET /v1/models`` (chosen by the ``anthropic-version`` header).

Auth (``x-api-key`` or ``Authorization: Bearer``) is the edge middleware's; ``anthropic-version`` and
``anthropic-beta`` are accepted whatever they say, and query strings (``?beta=true``) are ignored.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from freellm.core.tokens import estimate_input_tokens
from freellm.engine.context import TurnOutcome
from freellm.fusion.http import fusion_requested, new_fusion_id, respond_fusion
from freellm.fusion.options import FUSION_MODEL
from freellm.server.body import read_json
from freellm.server.state import BASE_HEADERS, GATEWAY, REQUEST_ID
from freellm.server.turn_http import counted_request, respond_turn
from freellm.surfaces.anthropic.mapping import resolve_model, to_chat_request
from freellm.surfaces.anthropic.render import MessagesRenderer, message_body, new_message_id
from freellm.surfaces.anthropic.wire import parse_messages_request

__all__ = ["MODELS_CREATED_AT", "count_tokens", "list_models", "messages"]

MODELS_CREATED_AT = "2025-01-01T00:00:00Z"
"""``created_at`` of every listed model: the catalog has no dates, so one constant."""

_SLOTS = (("opus", "claude-opus-4-5"), ("sonnet", "claude-sonnet-4-5"), ("haiku", "claude-haiku-4-5"))


async def messages(request: web.Request) -> web.StreamResponse:
    gw = request.app[GATEWAY]
    settings = gw.settings
    wire = parse_messages_request(await read_json(request))
    fusion = fusion_requested(request, wire.model or "")
    target = FUSION_MODEL if fusion else resolve_model(wire.model, gw.catalog, settings.surfaces.anthropic.model_map)
    req = to_chat_request(wire, target)
    echo = wire.model if wire.model else target
    input_estimate = estimate_input_tokens(req, image_tokens=settings.routing.image_token_estimate)
    message_id = new_message_id()

    def render(outcome: TurnOutcome) -> dict[str, Any]:
        return message_body(outcome, model=echo, input_estimate=input_estimate, message_id=message_id)

    renderer = MessagesRenderer(echo, input_tokens=input_estimate, message_id=message_id)
    output_limit_asked = wire.max_tokens is not None and wire.max_tokens > 0
    if fusion:
        return await respond_fusion(
            request,
            req,
            surface="anthropic",
            raw_options=(wire.metadata or {}).get("fusion"),
            options_param="metadata.fusion",
            renderer=renderer,
            render_completion=render,
            fusion_id=new_fusion_id(),
            created=int(time.time()),
            headers={"request-id": request[REQUEST_ID]},
            output_limit_asked=output_limit_asked,
        )
    return await respond_turn(
        request,
        req,
        surface="anthropic",
        renderer=renderer,
        render_completion=render,
        headers={"request-id": request[REQUEST_ID]},
        cache_variant=f"model={echo}",
        output_limit_asked=output_limit_asked,
    )


async def count_tokens(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    wire = parse_messages_request(await read_json(request))
    req = await counted_request(request, to_chat_request(wire, "auto"), "anthropic")
    tokens = estimate_input_tokens(req, image_tokens=gw.settings.routing.image_token_estimate)
    return web.json_response({"input_tokens": tokens}, headers=request[BASE_HEADERS])


def list_models(request: web.Request) -> web.Response:
    """``GET /v1/models`` in Anthropic's list shape: ``auto``, the Claude family slots (when anything is
    available) and every available model group."""
    gw = request.app[GATEWAY]
    catalog = gw.catalog
    model_map = gw.settings.surfaces.anthropic.model_map
    entries: list[tuple[str, str]] = [("auto", "freellm auto (the configured chain)")]
    if gw.settings.fusion.enabled:
        entries.append((FUSION_MODEL, "freellm fusion (a panel of models, one judged answer)"))
    groups = [
        routes[0].model
        for routes in catalog.groups.values()
        if any(r.enabled and catalog.keys.get(r.provider) for r in routes)
    ]
    if groups:
        for family, slot in _SLOTS:
            entries.append(
                (slot, f"Claude {family.capitalize()} → {resolve_model(slot, catalog, model_map)}")
            )
    entries.extend((g, g) for g in groups)
    data = [
        {"type": "model", "id": model_id, "display_name": name, "created_at": MODELS_CREATED_AT}
        for model_id, name in dict(entries).items()
    ]
    body = {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
    return web.json_response(body, headers=request[BASE_HEADERS])
