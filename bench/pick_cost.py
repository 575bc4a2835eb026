"""What one routing decision costs under each strategy: ``python -m bench.pick_cost``.

Four routes on four providers, one key each, an in-memory store; each iteration plans ``auto``, picks
a route (gates, lease), releases the lease and records the attempt in the statistics — the router's
whole share of a request. Prints microseconds per decision for every strategy (the scored ones pay a
cached order lookup; the scoring itself runs once per ``routing.stats_ttl_s``).
"""

from __future__ import annotations

import asyncio
import time

from freellm.config import Settings
from freellm.routing.catalog import Catalog
from freellm.routing.router import Needs, Router, SkipSets
from freellm.routing.scoring import STRATEGIES
from freellm.store.base import key_scope
from freellm.store.memory import MemoryStore

ROUTES = 4
ITERATIONS = 20_000


def _settings(strategy: str) -> Settings:
    providers = [
        {"name": f"p{i}", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "keys": ["k"], "models": [{"id": "m"}]}
        for i in range(ROUTES)
    ]
    return Settings.model_validate(
        {"providers": providers, "chain": [f"p{i}/m" for i in range(ROUTES)], "routing": {"strategy": strategy}}
    )


async def _cost(strategy: str) -> float:
    settings = _settings(strategy)
    store = MemoryStore()
    await store.open()
    router = Router(settings, Catalog(settings), {}, store)
    needs = Needs(estimate=100)
    started = time.perf_counter()
    for _ in range(ITERATIONS):
        now = time.time()
        pick = await router.pick(router.plan("auto"), needs, SkipSets(), now)
        assert pick.choice is not None
        route, key = pick.choice
        scope = key_scope(route.provider, route.model, key.key_id)
        await store.release_lease(scope, pick.lease_id)
        router.stats.observe(route.label, scope, ok=True, now=now, ttfb_ms=5, duration_ms=6, tokens_out=10)
    await store.close()
    return (time.perf_counter() - started) / ITERATIONS * 1e6


async def main() -> None:
    for strategy in STRATEGIES:
        print(f"{strategy:9} {await _cost(strategy):6.1f} µs per routing decision ({ROUTES} routes)")


if __name__ == "__main__":
    asyncio.run(main())
