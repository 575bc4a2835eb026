"""Response-cache lookup: after the gates, before routing (seed §13).

Decides the request's cache status from the config and its headers (:mod:`freellm.cache.control`):
off → nothing (no header); bypassed or ineligible (temperature above ``max_temperature``, or a surface
answer that must not be replayed, like a stored Responses API response) → ``BYPASS``;
otherwise the key is computed and a live entry ends the turn as a :class:`Replay` (``HIT``), or the key
is kept on the context so the server can store the answer (``MISS``).
"""

from __future__ import annotations

from freellm.cache.control import CacheChoice, cache_choice
from freellm.cache.key import cache_key, eligible
from freellm.cache.store import ResponseCache
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft, Replay

__all__ = ["CacheLookupStage"]


class CacheLookupStage:
    name = "cache"

    def __init__(self, cache: ResponseCache) -> None:
        self._cache = cache

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft | Replay:
        cache = self._cache
        choice = cache_choice(cache.config.enabled, ctx.cache_header, ctx.cache_control)
        if choice is CacheChoice.OFF:
            return draft
        req = draft.req
        variant = ctx.cache_variant
        if variant is None or choice is CacheChoice.BYPASS or not eligible(req, cache.config.max_temperature):
            ctx.cache_status = "BYPASS"
            return draft
        compression = ctx.compression.fingerprint if ctx.compression is not None else "none"
        key = cache_key(req, surface=ctx.surface, variant=variant, compression=compression)
        reply = await cache.get(key)
        if reply is not None:
            ctx.cache_status = "HIT"
            return Replay(reply)
        ctx.cache_status = "MISS"
        ctx.cache_key = key
        return draft
