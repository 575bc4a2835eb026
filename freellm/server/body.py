"""Reading a request body as JSON, the same way on every surface."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from freellm.errors import ClientError

__all__ = ["read_json"]


async def read_json(request: web.Request) -> Any:
    """Read and decode the body: 413 past the size limit (raised by aiohttp), 400 when empty or not JSON."""
    raw = await request.read()
    if not raw:
        raise ClientError(400, "Request body is empty; expected a JSON object.")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientError(400, f"Malformed JSON body: {exc}") from None
