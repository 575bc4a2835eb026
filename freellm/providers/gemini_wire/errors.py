"""Gemini error bodies in the words the failure classifier reads.

Google APIs answer errors as ``{"error": {"code": 429, "message": "…", "status": "RESOURCE_EXHAUSTED",
"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}, …]}}``: as an
HTTP body and, rarely, as a ``data:`` frame inside a 200 stream. :func:`gemini_error_message` words it
``<STATUS>: <message> (<reasons and quota ids>)`` so the classifier sees every signal it knows:

* ``RESOURCE_EXHAUSTED`` (429) → rate limited; the ``QuotaFailure`` quota ids are appended, so a daily
  quota (``GenerateRequestsPerDayPerProjectPerModel-FreeTier``) reads as one;
* ``API key not valid`` (400 ``INVALID_ARGUMENT``, reason ``API_KEY_INVALID``) → a bad key;
* ``UNAVAILABLE``/``INTERNAL`` (503/500) → provider failure; ``NOT_FOUND`` (404) → model gone;
  ``PERMISSION_DENIED`` (403) → forbidden; other 400s → a provider rejection of the request.

:func:`retry_delay_of` reads ``RetryInfo.retryDelay`` (``"17s"``, ``"1.5s"``, ``"250ms"``): Gemini sends no
``Retry-After`` header, the body is the only hint.
"""

from __future__ import annotations

import re
from typing import Any, Final

from freellm.engine.failure import MAX_RETRY_AFTER_S
from freellm.errors import UpstreamError
from freellm.providers.http import error_message_of

__all__ = ["gemini_error_message", "inband_error", "retry_delay_of"]

_INBAND_PREFIX: Final = "in-band provider error: "
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_MAX_EXTRAS: Final = 6


def gemini_error_message(body: Any) -> str:
    """``"<STATUS>: <message> (<reason>, <quota id>…)"`` for a Google error body; other shapes as usual."""
    err = _error_object(body)
    if err is None:
        return error_message_of(body)
    status = err.get("status")
    message = err.get("message")
    text = message if isinstance(message, str) else ""
    if isinstance(status, str) and status:
        text = f"{status}: {text}" if text else status
    extras = _detail_facts(err.get("details"))
    if extras:
        text = f"{text} ({', '.join(extras)})" if text else ", ".join(extras)
    return text or error_message_of(body)


def retry_delay_of(body: Any) -> float | None:
    """Seconds from the body's ``google.rpc.RetryInfo.retryDelay`` (≤ 24 h), or None."""
    err = _error_object(body)
    details = err.get("details") if err is not None else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if not isinstance(detail, dict):
            continue
        delay = detail.get("retryDelay")
        seconds: float | None = None
        if isinstance(delay, str):
            m = _DURATION.match(delay)
            if m:
                seconds = float(m.group(1)) * _UNIT_SECONDS[(m.group(2) or "s").lower()]
        elif isinstance(delay, dict):  # proto Duration written as an object
            secs, nanos = delay.get("seconds", 0), delay.get("nanos", 0)
            if isinstance(secs, int | float | str) and isinstance(nanos, int | float):
                try:
                    seconds = float(secs) + float(nanos) / 1e9
                except ValueError:
                    seconds = None
        if seconds is not None and seconds > 0:
            return min(seconds, MAX_RETRY_AFTER_S)
    return None


def inband_error(body: Any) -> UpstreamError:
    """The error for an ``{"error": …}`` object inside a 200 answer (stream frame or body)."""
    return UpstreamError(
        _INBAND_PREFIX + (gemini_error_message(body) or "unknown error"),
        retry_after_s=retry_delay_of(body),
        body=body,
    )


def _error_object(body: Any) -> dict[str, Any] | None:
    if isinstance(body, list) and len(body) == 1:  # a JSON-array stream answered with one error
        body = body[0]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return err
    return None


def _detail_facts(details: Any) -> list[str]:
    """ErrorInfo reasons and QuotaFailure quota ids: the machine-readable part of the error."""
    facts: list[str] = []
    if not isinstance(details, list):
        return facts
    for detail in details:
        if not isinstance(detail, dict):
            continue
        reason = detail.get("reason")
        if isinstance(reason, str) and reason:
            facts.append(reason)
        violations = detail.get("violations")
        if isinstance(violations, list):
            for violation in violations:
                if isinstance(violation, dict):
                    quota = violation.get("quotaId")
                    if isinstance(quota, str) and quota:
                        facts.append(quota)
    return list(dict.fromkeys(facts))[:_MAX_EXTRAS]
