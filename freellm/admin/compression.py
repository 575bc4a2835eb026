"""``GET /admin/compression/stats`` and ``POST /admin/compression/preview`` (docs/compression.md).

The preview runs the compressor on a chat request exactly as a request would be compressed — same
engines, same gate — and records nothing: no statistics, no frozen-prompt memory. With compression not
configured the compressor is built by the first of these calls (:meth:`Gateway.ensure_compressor`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm.core.request import parse_chat_request
from freellm.errors import ClientError
from freellm.server.body import read_json
from freellm.server.state import BASE_HEADERS, GATEWAY

__all__ = ["register"]

_MODES = ("off", "lossless", "standard", "aggressive")


def register(app: web.Application) -> None:
    app.router.add_get("/admin/compression/stats", compression_stats)
    app.router.add_post("/admin/compression/preview", compression_preview)


async def compression_stats(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    return web.json_response(
        {**gw.ensure_compressor().stats(), "mode": gw.settings.compression.mode}, headers=request[BASE_HEADERS]
    )


async def compression_preview(request: web.Request) -> web.Response:
    """Body: a chat request plus an optional ``mode`` (default: the configured mode, ``standard`` when
    compression is off). Answers ``{mode, messages, saved_tokens, stages}``."""
    gw = request.app[GATEWAY]
    body = await read_json(request)
    mode: Any = None
    if isinstance(body, dict):
        body = dict(body)
        mode = body.pop("mode", None)
    configured = gw.settings.compression.mode
    if mode is None:
        mode = configured if configured != "off" else "standard"
    if not isinstance(mode, str) or mode.strip().lower() not in _MODES:
        raise ClientError(
            400, f"Invalid request: mode: Input should be one of {', '.join(_MODES)}", param="mode"
        )
    mode = mode.strip().lower()
    req = parse_chat_request(body)
    messages = [m.wire() for m in req.messages]
    if mode == "off":
        return web.json_response(
            {"mode": "off", "messages": messages, "saved_tokens": 0, "stages": []}, headers=request[BASE_HEADERS]
        )
    compressor = gw.ensure_compressor()
    outcome = compressor.compress(messages, mode=mode, target_tokens=gw.settings.compression.target_tokens, record=False)
    return web.json_response(
        {
            "mode": mode,
            "messages": outcome.messages,
            "saved_tokens": outcome.saved_tokens,
            "stages": [
                {"engine": s.engine, "applied": s.applied, "reason": s.reason, "saved_chars": s.saved_chars}
                for s in outcome.stages
            ],
        },
        headers=request[BASE_HEADERS],
    )
