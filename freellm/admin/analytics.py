"""``GET /admin/analytics?window=1h|24h|7d|30d``: per-route statistics over the request log, computed
by the store (SQL on the SQLite store). Every field is defined in docs/analytics.md."""

from __future__ import annotations

import time
from typing import Any, Final

from aiohttp import web

from freellm.errors import ClientError
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.store.base import Analytics, RouteStats, StateStore

__all__ = ["DEFAULT_WINDOW", "WINDOWS", "analytics_doc", "analytics_json", "register"]

WINDOWS: Final[dict[str, float]] = {"1h": 3600.0, "24h": 86_400.0, "7d": 7 * 86_400.0, "30d": 30 * 86_400.0}
"""Window name → its length in seconds (the window ends now)."""
DEFAULT_WINDOW: Final = "24h"


def register(app: web.Application) -> None:
    app.router.add_get("/admin/analytics", analytics)


def _route_json(stats: RouteStats) -> dict[str, Any]:
    return {
        "route": stats.route,
        "requests": stats.requests,
        "success_rate": stats.success_rate,
        "fallback_rate": stats.fallback_rate,
        "p50_ms": stats.p50_ms,
        "p95_ms": stats.p95_ms,
        "ttft_p50_ms": stats.ttft_p50_ms,
        "tokens_in": stats.tokens_in,
        "tokens_out": stats.tokens_out,
        "failures": stats.failures,
    }


def analytics_json(window: str, result: Analytics) -> dict[str, Any]:
    return {
        "window": window,
        "routes": [_route_json(s) for s in result.routes],
        "cache_tokens_saved": result.cache_tokens_saved,
    }


async def analytics_doc(store: StateStore, window: str, now: float) -> dict[str, Any]:
    """The analytics document for ``window`` (a :data:`WINDOWS` name) ending at ``now``; a 400 naming
    the valid windows otherwise. Shared by the route and the MCP ``usage_summary`` tool."""
    seconds = WINDOWS.get(window)
    if seconds is None:
        raise ClientError(
            400,
            f"Invalid request: window: Input should be one of {', '.join(WINDOWS)}",
            code="invalid_parameter",
            param="window",
        )
    return analytics_json(window, await store.request_analytics(now - seconds, now))


async def analytics(request: web.Request) -> web.Response:
    window = request.query.get("window", DEFAULT_WINDOW).strip().lower()
    body = await analytics_doc(request.app[GATEWAY].store, window, time.time())
    return web.json_response(body, headers=request[BASE_HEADERS])
