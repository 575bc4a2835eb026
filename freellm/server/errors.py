"""Error responses. Today every route speaks OpenAI's envelope; surfaces with their own envelope
(Anthropic, Gemini) register a renderer here by path prefix."""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from freellm.engine.exhaustion import retry_after_header
from freellm.errors import ClientError, Exhausted
from freellm.server.headers import routing_headers

__all__ = ["error_response"]


def error_response(exc: ClientError | Exhausted, extra: dict[str, str]) -> web.Response:
    headers = dict(extra)
    if isinstance(exc, Exhausted):
        headers.update(routing_headers(None, exc.trail, detail=False, max_len=256))
        if exc.retry_at_ms is not None:
            retry = retry_after_header(exc.retry_at_ms, int(time.time() * 1000))
            if retry is not None:
                headers["Retry-After"] = retry
    else:
        headers.update(exc.headers)
    return web.Response(
        status=exc.status, body=orjson.dumps(exc.envelope()), content_type="application/json", headers=headers
    )
