"""``GET /admin/cooldowns``: the cooldowns running now, read-only.

A cooldown keeps one (provider, model, key) — or a whole (provider, model), when the model is benched —
out of routing until it ends (docs/routing.md). The store keys them by a scope string whose parts are
joined with ``\\x1f``; this route (and ``freellm status``, through :func:`cooldowns_json`) shows the
parts as fields, and ``scope`` as ``provider/model`` or ``provider/model/key_id``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.store.base import CooldownRecord

__all__ = ["cooldowns_json", "register"]


def register(app: web.Application) -> None:
    app.router.add_get("/admin/cooldowns", list_cooldowns)


def cooldowns_json(records: Mapping[str, CooldownRecord]) -> list[dict[str, Any]]:
    """The store's active cooldowns as the route lists them: soonest to end first."""
    rows: list[dict[str, Any]] = []
    for scope, record in records.items():
        parts = scope.split("\x1f")
        rows.append(
            {
                "scope": "/".join(parts),
                "provider": parts[0],
                "model": parts[1] if len(parts) > 1 else None,
                "key_id": parts[2] if len(parts) > 2 else None,
                "until": record.until,
                "source": record.source,
                "reason": record.reason,
            }
        )
    rows.sort(key=lambda r: (r["until"], r["scope"]))
    return rows


async def list_cooldowns(request: web.Request) -> web.Response:
    records = await request.app[GATEWAY].store.active_cooldowns(time.time())
    return web.json_response({"data": cooldowns_json(records)}, headers=request[BASE_HEADERS])
