"""Error responses in the client's own envelope.

Every surface speaks its own error shape (OpenAI's ``{"error": {...}}``, Anthropic's
``{"type": "error", ...}``, Gemini's ``{"error": {"code", "status"}}``). A surface registers a body
renderer for its path prefix with :func:`register_error_style`; the edge middleware and the turn
handler then render *every* refusal on that path — auth, limits, validation, exhaustion — in that shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from freellm.engine.exhaustion import retry_after_header
from freellm.errors import ClientError, Exhausted
from freellm.server.headers import routing_headers

__all__ = ["ERROR_STYLES", "ErrorBody", "error_response", "error_style_for", "openai_error_body", "register_error_style"]

ErrorBody = Callable[[ClientError | Exhausted], dict[str, Any]]

ERROR_STYLES = web.AppKey("error_styles", list[tuple[str, ErrorBody]])


def openai_error_body(exc: ClientError | Exhausted) -> dict[str, Any]:
    return exc.envelope()


def register_error_style(app: web.Application, path_prefix: str, body: ErrorBody) -> None:
    styles = app.setdefault(ERROR_STYLES, [])
    styles.append((path_prefix, body))
    styles.sort(key=lambda item: len(item[0]), reverse=True)  # longest prefix wins


def error_style_for(app: web.Application, path: str) -> ErrorBody:
    for prefix, body in app.get(ERROR_STYLES, ()):
        if path.startswith(prefix):
            return body
    return openai_error_body


def error_response(
    exc: ClientError | Exhausted, extra: dict[str, str], body: ErrorBody = openai_error_body
) -> web.Response:
    headers = dict(extra)
    if isinstance(exc, Exhausted):
        headers.update(routing_headers(None, exc.trail, detail=False))
        if exc.retry_at_ms is not None:
            retry = retry_after_header(exc.retry_at_ms, int(time.time() * 1000))
            if retry is not None:
                headers["Retry-After"] = retry
    else:
        headers.update(exc.headers)
    return web.Response(
        status=exc.status, body=orjson.dumps(body(exc)), content_type="application/json", headers=headers
    )
