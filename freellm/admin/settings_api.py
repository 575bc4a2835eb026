"""``GET /admin/settings`` and ``PATCH /admin/settings``: the settings that are safe to change live.

Sections and fields: :data:`freellm.admin.live.LIVE_FIELDS` (routing strategy, cache, compression,
fusion defaults). A PATCH names only what it changes (``{"routing": {"strategy": "fast"}}``); an
unknown section or field, or a value the config would refuse, is a 400 and nothing is applied.
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from freellm.admin.changes import admin_json, commit, json_reply, live_of
from freellm.admin.live import LIVE_FIELDS
from freellm.config import Settings
from freellm.errors import ClientError
from freellm.server.state import GATEWAY, Gateway

__all__ = ["patch_live_settings", "register"]


def register(app: web.Application) -> None:
    app.router.add_get("/admin/settings", get_settings)
    app.router.add_patch("/admin/settings", patch_settings)


def _live_view(settings: Settings) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for section, fields in LIVE_FIELDS.items():
        values = getattr(settings, section).model_dump(mode="json")
        out[section] = {k: v for k, v in values.items() if k in fields}
    return out


async def get_settings(request: web.Request) -> web.Response:
    return json_reply(request, _live_view(request.app[GATEWAY].settings))


async def patch_settings(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    return json_reply(request, await patch_live_settings(gw, await admin_json(request)))


async def patch_live_settings(gw: Gateway, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Apply a PATCH document (``{section: {field: value}}``) the way the route does — checked against
    :data:`LIVE_FIELDS`, validated whole, persisted, applied — and return the new live view. The MCP
    ``set_routing_strategy`` tool comes through here too, so there is one path for a live change."""
    overlay = copy.deepcopy(live_of(gw).overlay)
    for section, values in body.items():
        fields = LIVE_FIELDS.get(section)
        if fields is None:
            allowed = ", ".join(LIVE_FIELDS)
            raise ClientError(400, f"Invalid request: {section}: not a live setting (one of {allowed})", param=section)
        if not isinstance(values, dict):
            raise ClientError(400, f"Invalid request: {section}: Input should be an object", param=section)
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ClientError(
                400,
                f"Invalid request: {section}.{unknown[0]}: not a live setting (one of {', '.join(sorted(fields))})",
                param=f"{section}.{unknown[0]}",
            )
        overlay.settings[section] = {**overlay.settings.get(section, {}), **values}
    settings = await commit(gw, overlay)
    return _live_view(settings)
