"""The Ollama API under ``/api/`` (docs/surfaces/ollama.md): tools that only speak Ollama — Open WebUI,
Continue, Zed, the ``ollama`` libraries — get every provider behind the gateway.

Who may call it is ``ollama.mode`` (:mod:`freellm.surfaces.ollama.access`, run by the edge middleware
instead of the client-key check). Chat and
generate run through the same engine, fallback loop and commit point as every surface.
"""

from __future__ import annotations

import time
from typing import Any, Final

import orjson
from aiohttp import web

from freellm.errors import ClientError
from freellm.routing.availability import ModelAvailability, embedding_availability, model_availability
from freellm.server.body import read_json
from freellm.server.errors import register_error_style
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.server.turn_http import respond_turn
from freellm.surfaces.ollama.access import OLLAMA_PREFIX
from freellm.surfaces.ollama.embed import embed, legacy_embeddings
from freellm.surfaces.ollama.mapping import (
    chat_request,
    generate_request,
    is_load_request,
    model_name,
    requested_route,
)
from freellm.surfaces.ollama.render import (
    OllamaRenderer,
    Surface,
    completion_body,
    created_at,
    load_body,
    ollama_error_body,
)
from freellm.surfaces.ollama.wire import ChatBody, GenerateBody, ShowBody, parse_body

__all__ = ["OLLAMA_VERSION", "register"]

OLLAMA_VERSION: Final = "0.9.9"
"""What ``GET /api/version`` reports: recent enough that clients enable thinking and tools."""
_BOOT = created_at()


def _json(request: web.Request, body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=request[BASE_HEADERS]
    )


# ---- models -------------------------------------------------------------------------------------------


def _details(model: ModelAvailability) -> dict[str, Any]:
    family = model.routes[0].provider if model.routes else "freellm"
    return {
        "parent_model": "",
        "format": "freellm",
        "family": family,
        "families": sorted({r.provider for r in model.routes}) or [family],
        "parameter_size": "remote",
        "quantization_level": "remote",
    }


def _tag(name: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "model": name, "modified_at": _BOOT, "size": 0, "digest": "", "details": details}


_AUTO_DETAILS: Final = {
    "parent_model": "",
    "format": "freellm",
    "family": "freellm",
    "families": ["freellm"],
    "parameter_size": "remote",
    "quantization_level": "remote",
}


async def tags(request: web.Request) -> web.Response:
    """``GET /api/tags``: ``auto``, every model and every embedding family that can be served now."""
    gw = request.app[GATEWAY]
    models = [_tag("auto", _AUTO_DETAILS)]
    models += [_tag(m.id, _details(m)) for m in model_availability(gw.catalog, gw.router) if m.available]
    models += [_tag(m.id, _details(m)) for m in embedding_availability(gw.catalog, gw.router) if m.available]
    return _json(request, {"models": models})


async def show(request: web.Request) -> web.Response:
    """``POST /api/show``: a model's card — context length, capabilities (tools, vision)."""
    body = parse_body(ShowBody, await read_json(request))
    raw = body.model or body.name
    if not raw or not raw.strip():
        raise ClientError(400, "model is required")
    gw = request.app[GATEWAY]
    name = requested_route(raw)
    found: ModelAvailability | None = None
    if name.lower() != "auto":
        listed = [*model_availability(gw.catalog, gw.router), *embedding_availability(gw.catalog, gw.router)]
        found = next((m for m in listed if m.id.lower() == name.lower()), None)
        if found is None:
            raise ClientError(404, f"model '{raw.strip()}' not found", code="model_not_found")
    routes = found.routes if found is not None else gw.catalog.chain
    contexts = [r.context_window for r in routes if r.context_window]
    ctx = max(contexts) if contexts else 128_000
    if routes and routes[0].family is not None:  # an embedding family: /api/embed only
        capabilities = ["embedding"]
    else:
        capabilities = ["completion"]
        if any(r.tools for r in routes):
            capabilities.append("tools")
        if any(r.vision for r in routes):
            capabilities.append("vision")
    return _json(
        request,
        {
            "modelfile": f"FROM {model_name(raw)}",
            "parameters": f"num_ctx {ctx}",
            "template": "{{ .Prompt }}",
            "details": _details(found) if found is not None else _AUTO_DETAILS,
            "model_info": {"general.architecture": "freellm", "general.context_length": ctx},
            "capabilities": capabilities,
            "modified_at": _BOOT,
        },
    )


async def version(request: web.Request) -> web.Response:
    return _json(request, {"version": OLLAMA_VERSION})


async def running(request: web.Request) -> web.Response:
    """``GET /api/ps``: models loaded in memory — none here: every model is remote, nothing is loaded."""
    return _json(request, {"models": []})


# ---- chat and generate --------------------------------------------------------------------------------


def _unload(keep_alive: object) -> bool:
    return keep_alive in (0, 0.0, "0", "0s", "0m")


async def _turn(request: web.Request, surface: Surface, body: ChatBody | GenerateBody) -> web.StreamResponse:
    name = model_name(body.model)
    if is_load_request(body):
        return _json(request, load_body(name, surface, unload=_unload(body.keep_alive)))
    gw = request.app[GATEWAY]
    cap = gw.settings.ollama.default_max_tokens
    req = (
        chat_request(body, default_max_tokens=cap)
        if isinstance(body, ChatBody)
        else generate_request(body, default_max_tokens=cap)
    )
    show_thinking = body.think is not False
    started = time.monotonic_ns()
    return await respond_turn(
        request,
        req,
        surface=f"ollama-{surface}",
        renderer=OllamaRenderer(name, surface, show_thinking=show_thinking),
        render_completion=lambda outcome: completion_body(
            outcome, name, surface, show_thinking=show_thinking, started_ns=started
        ),
        # The bytes echo the model name and carry the thinking or not: both part of the cache key.
        cache_variant=orjson.dumps([name, show_thinking]).decode(),
        output_limit_asked=body.options is not None and (body.options.num_predict or 0) > 0,
    )


async def chat(request: web.Request) -> web.StreamResponse:
    return await _turn(request, "chat", parse_body(ChatBody, await read_json(request)))


async def generate(request: web.Request) -> web.StreamResponse:
    return await _turn(request, "generate", parse_body(GenerateBody, await read_json(request)))


def register(app: web.Application) -> None:
    """The Ollama routes and their error shape (``{"error": "..."}``) for everything under ``/api/``."""
    app.router.add_get("/api/version", version)
    app.router.add_get("/api/tags", tags)
    app.router.add_get("/api/ps", running)
    app.router.add_post("/api/show", show)
    app.router.add_post("/api/chat", chat)
    app.router.add_post("/api/generate", generate)
    app.router.add_post("/api/embed", embed)
    app.router.add_post("/api/embeddings", legacy_embeddings)
    register_error_style(app, OLLAMA_PREFIX, ollama_error_body)
