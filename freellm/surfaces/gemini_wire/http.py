"""HTTP handlers of the Gemini surface, under both ``/v1beta`` (Gemini CLI) and ``/v1`` (google-genai):

* ``POST …/models/{model}:generateContent`` | ``:streamGenerateContent`` (``?alt=sse`` → SSE, else a
  streamed JSON array) | ``:countTokens`` | ``:embedContent`` | ``:batchEmbedContents``
  (:mod:`~freellm.surfaces.gemini_wire.embed`) — one handler, :func:`model_action`, dispatching on the
  action after the last ``:``;
* ``GET …/models`` (:func:`list_models`, with ``pageSize``/``pageToken``) and ``GET …/models/{id}``
  (:func:`get_model`). ``GET /v1/models`` is shared with the OpenAI surface: ``server/routes.py`` hands
  it here for Gemini clients (:func:`~freellm.surfaces.gemini_wire.clients.is_gemini_client`), and
  :func:`get_model` answers OpenAI clients in OpenAI's shape.

Auth (``x-goog-api-key``, ``?key=``, or ``Authorization: Bearer``) is the edge middleware's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm.core.tokens import estimate_input_tokens
from freellm.engine.context import TurnOutcome
from freellm.errors import ClientError
from freellm.routing.catalog import Catalog
from freellm.routing.family_map import is_routable
from freellm.server.body import read_json
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.server.turn_http import counted_request, respond_turn
from freellm.surfaces.gemini_wire.clients import is_gemini_client
from freellm.surfaces.gemini_wire.embed import EMBED_ACTIONS, batch_embed_contents, embed_content
from freellm.surfaces.gemini_wire.mapping import (
    count_tokens as estimate_count_tokens,
)
from freellm.surfaces.gemini_wire.mapping import (
    include_thoughts,
    resolve_model,
    strip_model_prefix,
    to_chat_request,
)
from freellm.surfaces.gemini_wire.render import (
    GeminiStreamRenderer,
    generate_content_body,
    new_response_id,
)
from freellm.surfaces.gemini_wire.wire import (
    GenerateContentRequest,
    parse_count_tokens_request,
    parse_generate_request,
)

__all__ = ["get_model", "list_models", "list_models_handler", "model_action"]

GENERATE_ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")
"""What a (chat) model lists as its ``supportedGenerationMethods``."""
ACTIONS = (*GENERATE_ACTIONS, *EMBED_ACTIONS)
_DEFAULT_PAGE = 50
_MAX_PAGE = 1000
_DEFAULT_CONTEXT = 128_000
_MAX_OUTPUT = 8192
_FAMILY_SLOTS = (
    ("flash-lite", "gemini-2.5-flash-lite", "Gemini Flash-Lite"),
    ("flash", "gemini-2.5-flash", "Gemini Flash"),
    ("pro", "gemini-2.5-pro", "Gemini Pro"),
)


def _split(tail: str) -> tuple[str, str]:
    model, sep, action = tail.rpartition(":")
    if not sep or action not in ACTIONS:
        shown = (action if sep else tail)[:64]
        raise ClientError(
            404,
            f"Method `{shown}` is not supported; use :generateContent, :streamGenerateContent, :countTokens, "
            ":embedContent or :batchEmbedContents.",
            code="not_found",
        )
    return strip_model_prefix(model), action


async def model_action(request: web.Request) -> web.StreamResponse:
    """``POST …/models/{model}:{action}``."""
    model, action = _split(request.match_info["tail"])
    if action == "countTokens":
        return await _count_tokens(request)
    if action == "embedContent":
        return await embed_content(request, model)
    if action == "batchEmbedContents":
        return await batch_embed_contents(request, model)
    return await _generate(request, model, stream=action == "streamGenerateContent")


async def _generate(request: web.Request, model: str, *, stream: bool) -> web.StreamResponse:
    gw = request.app[GATEWAY]
    settings = gw.settings
    config = settings.surfaces.gemini
    wire = parse_generate_request(await read_json(request))
    target = resolve_model(model, gw.catalog, config.model_map)
    req = to_chat_request(wire, target, stream=stream, default_max_tokens=config.default_max_output_tokens)
    prompt_estimate = estimate_input_tokens(req, image_tokens=settings.routing.image_token_estimate)
    thoughts = include_thoughts(wire)
    response_id = new_response_id()

    def render(outcome: TurnOutcome) -> dict[str, Any]:
        return generate_content_body(
            outcome, response_id=response_id, include_thoughts=thoughts, prompt_estimate=prompt_estimate
        )

    sse = request.query.get("alt", "").lower() == "sse"
    model_version = model or target
    renderer = GeminiStreamRenderer(
        sse=sse,
        model_version=model_version,
        response_id=response_id,
        include_thoughts=thoughts,
        prompt_estimate=prompt_estimate,
    )
    return await respond_turn(
        request,
        req,
        surface="gemini",
        renderer=renderer,
        render_completion=render,
        cache_variant=f"sse={sse};model={model_version};thoughts={thoughts}",
        output_limit_asked=_asked_output(wire),
    )


def _asked_output(wire: GenerateContentRequest) -> bool:
    gc = wire.generation_config
    return gc is not None and gc.max_output_tokens is not None and gc.max_output_tokens > 0


async def _count_tokens(request: web.Request) -> web.Response:
    wire = parse_count_tokens_request(await read_json(request))
    inner = wire.generate_content_request
    if inner is not None:
        total = estimate_count_tokens(inner.contents, inner)
    else:
        total = estimate_count_tokens(wire.contents or [])
    settings = request.app[GATEWAY].settings
    if settings.compression.mode != "off" or settings.profiles:
        # Count what would be sent: Gemini's own figure, corrected by what compression and the
        # profile's system prompt change on the canonical form of the same contents.
        generate = inner if inner is not None else GenerateContentRequest(contents=wire.contents or [])
        canonical = to_chat_request(generate, "auto", stream=False, default_max_tokens=None)
        compressed = await counted_request(request, canonical, "gemini")
        total = max(0, total - (canonical.text_token_estimate - compressed.text_token_estimate))
    return web.json_response({"totalTokens": total}, headers=request[BASE_HEADERS])


# ---- models -------------------------------------------------------------------------------------------


def _entry(model_id: str, display: str, description: str, context: int | None) -> dict[str, Any]:
    ctx = context or _DEFAULT_CONTEXT
    return {
        "name": f"models/{model_id}",
        "version": "freellm",
        "displayName": display,
        "description": description,
        "inputTokenLimit": ctx,
        "outputTokenLimit": min(_MAX_OUTPUT, ctx),
        "supportedGenerationMethods": list(GENERATE_ACTIONS),
    }


def _available(catalog: Catalog, name: str) -> bool:
    try:
        _, routes = catalog.resolve(name)
    except ClientError:
        return False
    return any(catalog.keys.get(r.provider) for r in routes)


def _context(catalog: Catalog, name: str) -> int | None:
    try:
        _, routes = catalog.resolve(name)
    except ClientError:
        return None
    contexts = [r.context_window for r in routes if r.context_window]
    return max(contexts) if contexts else None


def _entries(request: web.Request) -> list[tuple[dict[str, Any], bool]]:
    """Every listed model with whether it is available: ``auto``, the Gemini family names (what they
    route to is in the description) and every model group."""
    gw = request.app[GATEWAY]
    catalog = gw.catalog
    model_map = gw.settings.surfaces.gemini.model_map
    auto = _entry("auto", "freellm auto", "freellm auto (the configured chain)", _context(catalog, "auto"))
    out: list[tuple[dict[str, Any], bool]] = [(auto, _available(catalog, "auto"))]
    for _family, slot, display in _FAMILY_SLOTS:
        target = resolve_model(slot, catalog, model_map)
        out.append(
            (
                _entry(slot, display, f"{display} → {target}", _context(catalog, target)),
                _available(catalog, target),
            )
        )
    for routes in catalog.groups.values():
        model_id = routes[0].model
        if model_id.lower() in ("auto", *(s for _, s, _ in _FAMILY_SLOTS)):
            continue
        providers = ", ".join(r.label for r in routes)
        out.append(
            (
                _entry(model_id, model_id, f"served by {providers}", _context(catalog, model_id)),
                _available(catalog, model_id),
            )
        )
    return out


def list_models(request: web.Request) -> web.Response:
    """``GET /v1beta/models`` (and ``GET /v1/models`` from a Gemini client): ``{models, nextPageToken?}``.
    ``?available=true`` keeps only models with a usable route; ``pageSize`` (default 50, at most 1000)
    and ``pageToken`` page through the list."""
    only_available = request.query.get("available", "").lower() in ("1", "true", "yes")
    models = [e for e, ok in _entries(request) if ok or not only_available]
    try:
        size = int(request.query.get("pageSize", _DEFAULT_PAGE))
        start = int(request.query.get("pageToken") or 0)
    except ValueError:
        raise ClientError(400, "pageSize and pageToken must be integers.") from None
    size = _DEFAULT_PAGE if size <= 0 else min(size, _MAX_PAGE)
    start = max(0, start)
    body: dict[str, Any] = {"models": models[start : start + size]}
    if start + size < len(models):
        body["nextPageToken"] = str(start + size)
    return web.json_response(body, headers=request[BASE_HEADERS])


async def list_models_handler(request: web.Request) -> web.Response:
    """The ``GET /v1beta/models`` route (:func:`list_models` is also called by ``GET /v1/models``)."""
    return list_models(request)


async def get_model(request: web.Request) -> web.Response:
    """``GET …/models/{id}``: ``auto``, a catalog model or route, or a Gemini family name (answered by
    the model map, so a client that checks a model before using it is not refused); else 404. An
    OpenAI client (no Google header, ``/v1``) gets OpenAI's model object instead."""
    gw = request.app[GATEWAY]
    catalog = gw.catalog
    name = strip_model_prefix(request.match_info["name"])
    if not is_gemini_client(request):
        if not name or not is_routable(catalog, name):
            raise ClientError(404, f"The model `{name[:128]}` does not exist.", code="model_not_found")
        body = {"id": name, "object": "model", "created": 0, "owned_by": "freellm"}
        return web.json_response(body, headers=request[BASE_HEADERS])
    for entry, _ok in _entries(request):
        if entry["name"].lower() == f"models/{name}".lower():
            return web.json_response(entry, headers=request[BASE_HEADERS])
    if name and is_routable(catalog, name):
        return web.json_response(
            _entry(name, name, f"freellm route {name}", _context(catalog, name)),
            headers=request[BASE_HEADERS],
        )
    if name.lower().startswith("gemini"):
        target = resolve_model(name, catalog, gw.settings.surfaces.gemini.model_map)
        entry = _entry(name, name, f"{name} → {target}", _context(catalog, target))
        return web.json_response(entry, headers=request[BASE_HEADERS])
    raise ClientError(404, f"Model `models/{name[:128]}` is not found.", code="model_not_found")

