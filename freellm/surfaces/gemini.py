"""Gemini surface: ``/v1beta/models/…`` for Gemini CLI and ``/v1/models/…`` for the google-genai SDK
(spec/surfaces.md §3a).

The surface is a translator at the edge, split into the :mod:`freellm.surfaces.gemini_wire` package:

* :mod:`~freellm.surfaces.gemini_wire.wire` — the request wire's own pydantic models (camelCase and
  snake_case field names; 400s name the Gemini path, e.g. ``contents.0.parts.1.inlineData``),
* :mod:`~freellm.surfaces.gemini_wire.mapping` — request → canonical chat request, Gemini model names
  through ``settings.surfaces.gemini.model_map`` (never a 404), the ``:countTokens`` estimate,
* :mod:`~freellm.surfaces.gemini_wire.render` — the stream renderer (SSE or streamed JSON array), the
  non-stream ``GenerateContentResponse`` and Gemini's error envelope,
* :mod:`~freellm.surfaces.gemini_wire.http` — the handlers,
* :mod:`~freellm.surfaces.gemini_wire.clients` — telling a Gemini client from an OpenAI one on the
  ``/v1/models`` paths both use.

Routing, retries and the commit point are the engine's: nothing here retries. Documented in
``docs/surfaces/gemini.md``.
"""

from __future__ import annotations

from aiohttp import web

from freellm.server.errors import register_error_style
from freellm.surfaces.gemini_wire.clients import GEMINI_PREFIXES, is_gemini_client
from freellm.surfaces.gemini_wire.http import get_model, list_models, list_models_handler, model_action
from freellm.surfaces.gemini_wire.render import gemini_error_body

__all__ = ["is_gemini_request", "list_models", "register"]


def register(app: web.Application) -> None:
    """Add this surface's routes and error style to the app.

    ``GET /v1/models`` itself stays the OpenAI surface's route; it hands Gemini clients to
    :func:`list_models`.
    """
    for base in ("/v1beta", "/v1"):
        app.router.add_post(base + "/models/{tail:.+}", model_action)
        app.router.add_get(base + "/models/{name:.+}", get_model)
    app.router.add_get("/v1beta/models", list_models_handler)
    for prefix in GEMINI_PREFIXES:
        register_error_style(app, prefix, gemini_error_body)


def is_gemini_request(request: web.Request) -> bool:
    """The request comes from a Gemini client (a Google header, ``?key=``, or a ``/v1beta`` path)."""
    return is_gemini_client(request)
