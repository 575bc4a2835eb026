"""Reading a request body as JSON, the same way on every surface."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from freellm.errors import ClientError

__all__ = ["read_json"]


async def read_json(request: web.Request, *, limit: int | None = None) -> Any:
    """Read and decode the body: 413 past the size limit (aiohttp's, or ``limit`` bytes when given),
    400 when empty or not JSON."""
    if limit is not None:
        if request.content_length is not None and request.content_length > limit:
            raise _too_large(limit)
        raw = await request.content.read(limit + 1)
        if len(raw) > limit:
            raise _too_large(limit)
    else:
        raw = await request.read()
    if not raw:
        raise ClientError(400, "Request body is empty; expected a JSON object.")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientError(400, f"Malformed JSON body: {exc}") from None


def _too_large(limit: int) -> ClientError:
    return ClientError(413, f"Request body too large (limit {limit // 1024} KiB).", code="request_too_large")
