"""OpenAI Responses API surface: ``POST /v1/responses``, ``GET``/``DELETE /v1/responses/{id}``.

Stateful: finished responses are stored (unless ``store: false``) through the ``StateStore`` and
``previous_response_id`` rebuilds the conversation from the stored chain. The implementation lives in
the :mod:`freellm.surfaces.responses` package; see ``docs/surfaces/responses.md``.
"""

from __future__ import annotations

from aiohttp import web

from freellm.surfaces.responses import http

__all__ = ["register"]


def register(app: web.Application) -> None:
    """Add this surface's routes and error style to the app."""
    http.register(app)
