"""Applying one admin change: validate the candidate configuration whole, persist it, then swap it in.

Every change the admin API makes goes through :func:`commit`: the candidate overlay is merged over
the base and validated like a config file; a change that does not validate is a 400 with the reason
and nothing is written or applied ("nothing half-written"). Only then is the overlay stored and the
running gateway moved onto the new settings.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from freellm.admin.live import LiveConfig, Overlay, apply_settings
from freellm.config import Settings
from freellm.errors import ClientError
from freellm.server.body import read_json
from freellm.server.state import BASE_HEADERS, GATEWAY, Gateway

__all__ = ["admin_json", "commit", "json_reply", "live_of", "read_admin_body", "validated"]


def live_of(gw: Gateway) -> LiveConfig:
    if gw.live is None:  # created at start-up with the app; absent only in a half-started app
        raise ClientError(503, "The admin configuration is not ready.", type="service_unavailable")
    return gw.live


def validated(live: LiveConfig, overlay: Overlay) -> Settings:
    """The settings ``overlay`` would give, or a 400 saying why it is not a valid configuration."""
    try:
        return live.effective(overlay)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"]) or "config"
        raise ClientError(400, f"Invalid configuration: {where}: {first['msg']}", code="invalid_config") from None
    except ValueError as exc:
        raise ClientError(400, f"Invalid configuration: {exc}", code="invalid_config") from None


async def commit(gw: Gateway, overlay: Overlay) -> Settings:
    """Validate, persist and apply ``overlay``; returns the new effective settings."""
    live = live_of(gw)
    settings = validated(live, overlay)
    live.overlay = overlay
    await live.save()
    await apply_settings(gw, settings)
    return settings


async def read_admin_body(request: web.Request) -> Any:
    """The JSON body of an admin request: 413 past ``server.admin_body_limit_kb``."""
    limit = request.app[GATEWAY].settings.server.admin_body_limit_kb * 1024
    return await read_json(request, limit=limit)


async def admin_json(request: web.Request) -> dict[str, Any]:
    body = await read_admin_body(request)
    if not isinstance(body, dict):
        raise ClientError(400, "Invalid request: body: Input should be a JSON object", code="invalid_request")
    return body


def json_reply(request: web.Request, body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=request[BASE_HEADERS]
    )
