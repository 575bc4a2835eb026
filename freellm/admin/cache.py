"""``GET /admin/cache/stats`` and ``DELETE /admin/cache`` (docs/cache.md)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm.cache.store import ResponseCache
from freellm.server.state import BASE_HEADERS, GATEWAY

__all__ = ["cache_stats_doc", "register"]


def register(app: web.Application) -> None:
    app.router.add_get("/admin/cache/stats", cache_stats)
    app.router.add_delete("/admin/cache", clear_cache)


def cache_stats_doc(cache: ResponseCache) -> dict[str, Any]:
    """``{entries: {json, stream}, hits, misses, tokens_saved, bytes, enabled}`` (the route's answer and
    the MCP ``cache_stats`` tool's)."""
    return {**cache.stats(), "enabled": cache.config.enabled}


async def cache_stats(request: web.Request) -> web.Response:
    return web.json_response(cache_stats_doc(request.app[GATEWAY].cache), headers=request[BASE_HEADERS])


async def clear_cache(request: web.Request) -> web.Response:
    removed = await request.app[GATEWAY].cache.clear()
    return web.json_response({"cleared": removed}, headers=request[BASE_HEADERS])
