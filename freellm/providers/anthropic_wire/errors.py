"""Anthropic error bodies in the words the failure classifier reads.

Anthropic answers errors as ``{"type": "error", "error": {"type": "<kind>", "message": "…"}}`` — as an
HTTP body (400, 401, 403, 404, 413, 429, 500, 529 …) and as an SSE ``error`` event inside a 200 stream
(typically ``overloaded_error`` mid-answer). The message keeps the error *type* in front of the prose, so
a status-less in-band error still classifies right: ``overloaded_error`` → server side (retryable),
``rate_limit_error`` → rate limited, ``authentication_error`` → key auth. HTTP errors go through
:func:`~freellm.engine.failure.http_error_message` (in :mod:`freellm.providers.http`), where the status
decides first: 529 is ≥ 500, so overloaded is a retryable provider failure, exactly like a 503.
"""

from __future__ import annotations

from typing import Any

from freellm.errors import UpstreamError
from freellm.providers.http import error_message_of

__all__ = ["anthropic_error_message", "inband_error"]

_INBAND_PREFIX = "in-band provider error: "


def anthropic_error_message(body: Any) -> str:
    """``"<type>: <message>"`` for an Anthropic error body; any other shape as the generic wording."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            kind = err.get("type")
            message = err.get("message")
            if isinstance(kind, str) and kind and isinstance(message, str):
                return f"{kind}: {message}" if message else kind
    return error_message_of(body)


def inband_error(body: Any) -> UpstreamError:
    """The error for an ``error`` event in a stream (or a 200 body of ``type: error``)."""
    return UpstreamError(_INBAND_PREFIX + (anthropic_error_message(body) or "unknown error"), body=body)
