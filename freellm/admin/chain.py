"""``GET /admin/chain`` and ``PUT /admin/chain``: the order ``auto`` tries, changed live.

A chain naming a route or model id the catalog does not know is a 400 naming it, and nothing is
applied. The new chain is kept in the overlay, so it wins over the YAML's on the next start.
"""

from __future__ import annotations

import copy

from aiohttp import web

from freellm.admin.changes import admin_json, commit, json_reply, live_of
from freellm.errors import ClientError
from freellm.server.state import GATEWAY

__all__ = ["register"]


def register(app: web.Application) -> None:
    app.router.add_get("/admin/chain", get_chain)
    app.router.add_put("/admin/chain", put_chain)


async def get_chain(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    return json_reply(request, {"chain": [r.label for r in gw.catalog.chain], "configured": gw.settings.chain})


async def put_chain(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    body = await admin_json(request)
    chain = body.get("chain")
    if not isinstance(chain, list) or not all(isinstance(c, str) and c.strip() for c in chain):
        raise ClientError(400, "Invalid request: chain: Input should be a list of provider/model routes", param="chain")
    catalog = gw.catalog
    unknown = [c for c in chain if not catalog.is_pin(c) and c.strip().lower() not in catalog.groups]
    if unknown:
        raise ClientError(
            400, f"Invalid request: chain: unknown route(s) {', '.join(unknown)}", code="unknown_route", param="chain"
        )
    overlay = copy.deepcopy(live_of(gw).overlay)
    overlay.chain = [c.strip() for c in chain]
    await commit(gw, overlay)
    return json_reply(request, {"chain": [r.label for r in gw.catalog.chain], "configured": gw.settings.chain})
