"""The admin API under ``/admin/`` (JSON; admin keys only — the edge middleware enforces it).

Every route reads or changes the same services the engine uses: one source of truth. Later issues add
more routes under the same rule (``/api/`` stays free for the Ollama emulation).
"""

from __future__ import annotations

from aiohttp import web

from freellm.admin import (
    analytics,
    cache,
    chain,
    compression,
    cooldowns,
    openapi,
    providers,
    requests,
    routing,
    runtime,
    settings_api,
)

__all__ = ["register"]


def register(app: web.Application) -> None:
    cache.register(app)
    compression.register(app)
    routing.register(app)
    requests.register(app)
    analytics.register(app)
    cooldowns.register(app)
    providers.register(app)
    chain.register(app)
    settings_api.register(app)
    openapi.register(app)
    runtime.register(app)
