"""``GET /admin/routing/explain?model=...``: how a request for ``model`` would be routed right now.

The same code path as a real request — the plan, the strategy's order (the cached scored order a
request would get) and every route's gates — with no side effect: no upstream call, no lease, no
quota. Optional ``tools=true``, ``vision=true`` and ``tokens=N`` (the request's estimate) shape the
imagined request; the default is a small text request. See docs/routing.md.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from freellm.errors import ClientError
from freellm.routing.router import Needs
from freellm.server.state import BASE_HEADERS, GATEWAY

__all__ = ["register"]

_TRUE = ("1", "true", "yes")


def register(app: web.Application) -> None:
    app.router.add_get("/admin/routing/explain", explain)


async def explain(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    router = gw.router
    query = request.query
    model = query.get("model", "auto").strip() or "auto"
    profile = query.get("profile") or None
    if profile is not None and profile not in gw.settings.profiles:
        raise ClientError(404, f"There is no profile `{profile}`.", code="profile_not_found", param="profile")
    tokens_raw = query.get("tokens", "")
    if tokens_raw and not tokens_raw.isdigit():
        raise ClientError(400, "Invalid request: tokens: Input should be a non-negative integer", param="tokens")
    routing = gw.settings.routing
    needs = Needs(
        estimate=int(tokens_raw) if tokens_raw else routing.output_reserve_default,
        tools=query.get("tools", "").lower() in _TRUE,
        vision=query.get("vision", "").lower() in _TRUE,
    )
    plan = router.plan(model, profile)
    scores: dict[str, float] = {}
    if plan.strategy != "priority":
        scores = {s.label: round(s.score, 6) for s in router.scored(plan)}
    checks = await router.examine(plan, needs, time.time())
    candidates: list[dict[str, Any]] = [
        {
            "route": c.route.label,
            "score": scores.get(c.route.label),
            "eligible": c.key is not None,
            "skip": c.skip,
        }
        for c in checks
    ]
    chosen = next((c["route"] for c in candidates if c["eligible"]), None)
    body = {"model": model, "strategy": plan.strategy, "candidates": candidates, "chosen": chosen}
    return web.json_response(body, headers=request[BASE_HEADERS])
