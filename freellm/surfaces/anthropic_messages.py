"""Anthropic Messages surface: ``/v1/messages`` for Claude Code and the Anthropic SDKs (spec/surfaces.md §2).

The surface is a translator at the edge, split into the :mod:`freellm.surfaces.anthropic` package:

* :mod:`~freellm.surfaces.anthropic.wire` — the request wire's own pydantic models (400s name the
  Anthropic path, e.g. ``messages.0.content``),
* :mod:`~freellm.surfaces.anthropic.mapping` — request → canonical chat request, Claude model names
  through ``settings.surfaces.anthropic.model_map`` (never a 404),
* :mod:`~freellm.surfaces.anthropic.render` — the stream renderer (exact event sequence), the
  non-stream ``message`` and Anthropic's error envelope,
* :mod:`~freellm.surfaces.anthropic.http` — the handlers.

Routing, retries and the commit point are the engine's: nothing here retries. Documented in
``docs/surfaces/anthropic.md``.
"""

from __future__ import annotations

from aiohttp import web

from freellm.server.errors import register_error_style
from freellm.surfaces.anthropic.http import count_tokens, list_models, messages
from freellm.surfaces.anthropic.render import anthropic_error_body

__all__ = ["PATH", "is_anthropic_request", "list_models", "register"]

PATH = "/v1/messages"


def register(app: web.Application) -> None:
    """Add this surface's routes and error style to the app."""
    app.router.add_post(PATH, messages)
    app.router.add_post(f"{PATH}/count_tokens", count_tokens)
    register_error_style(app, PATH, anthropic_error_body)


def is_anthropic_request(request: web.Request) -> bool:
    """The request comes from an Anthropic client (it carries ``anthropic-version``)."""
    return "anthropic-version" in request.headers
