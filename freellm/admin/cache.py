"""``GET /admin/cache/stats`` and ``DELETE /admin/cache`` (docs/cache.md)."""

from __future__ import annotations

from aiohttp import web

from freellm.server.state import BASE_HEADERS, GATEWAY

__all__ = ["register"]


def register(app: web.Application) -> None:
    app.router.add_get("/admin/cache/stats", cache_stats)
    app.router.add_delete("/admin/cache", clear_cache)


async def cache_stats(request: web.Request) -> web.Response:
    """``{entries: {json, stream}, hits, misses, tokens_saved, bytes, enabled}``."""
    cache = request.app[GATEWAY].cache
    return web.json_response({**cache.stats(), "enabled": cache.config.enabled}, headers=request[BASE_HEADERS])


async def clear_cache(request: web.Request) -> web.Response:
    removed = await request.app[GATEWAY].cache.clear()
    return web.json_response({"cleared": removed}, headers=request[BASE_HEADERS])
