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
from freellm.server.state import BASE_HEADERS, GATEWAY, Gateway

__all__ = ["explain_doc", "register"]

_TRUE = ("1", "true", "yes")
_FALSE = ("", "0", "false", "no")


def _flag(raw: str | None, name: str) -> bool:
    """A boolean query parameter. Anything but the usual spellings is a 400: ``tools=null`` silently
    meaning "no tools" would explain a routing the caller did not ask about."""
    value = (raw or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ClientError(400, f"Invalid request: {name}: Input should be a boolean (true or false)", param=name)


def register(app: web.Application) -> None:
    app.router.add_get("/admin/routing/explain", explain)


async def explain(request: web.Request) -> web.Response:
    query = request.query
    tokens_raw = query.get("tokens", "")
    if tokens_raw and not tokens_raw.isdigit():
        raise ClientError(400, "Invalid request: tokens: Input should be a non-negative integer", param="tokens")
    body = await explain_doc(
        request.app[GATEWAY],
        query.get("model", "auto"),
        profile=query.get("profile") or None,
        tools=_flag(query.get("tools"), "tools"),
        vision=_flag(query.get("vision"), "vision"),
        tokens=int(tokens_raw) if tokens_raw else None,
    )
    return web.json_response(body, headers=request[BASE_HEADERS])


async def explain_doc(
    gw: Gateway,
    model: str,
    *,
    profile: str | None = None,
    tools: bool = False,
    vision: bool = False,
    tokens: int | None = None,
) -> dict[str, Any]:
    """How a request for ``model`` would be routed now (``tokens``: its estimate, the output reserve
    when None). The route's answer and the MCP ``routing_explain`` tool's, so both read the same way."""
    router = gw.router
    model = model.strip() or "auto"
    if profile is not None and profile not in gw.settings.profiles:
        raise ClientError(404, f"There is no profile `{profile}`.", code="profile_not_found", param="profile")
    routing = gw.settings.routing
    needs = Needs(
        estimate=tokens if tokens is not None else routing.output_reserve_default,
        tools=tools,
        vision=vision,
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
    return {"model": model, "strategy": plan.strategy, "candidates": candidates, "chosen": chosen}
