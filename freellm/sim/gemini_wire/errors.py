"""Gemini's error bodies: the ``google.rpc.Status`` envelope of an HTTP error and of an in-band stream error.

Kept apart from the answers because errors have their own vocabulary (HTTP status → ``google.rpc.Code``
name) and their own details: ``ErrorInfo`` for a bad key, ``QuotaFailure`` for a 429 and ``RetryInfo``,
Gemini's only retry hint, which the gateway reads to size cooldowns. The same in-band body is sent as a
stream frame, or as a 200 body for a non-stream request.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["error_body", "inband_error_body"]

# HTTP status -> google.rpc.Code name (https://cloud.google.com/apis/design/errors).
_STATUS_NAMES: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(status: int, message: str, retry_after: str | None) -> dict[str, Any]:
    """Google's ``{"error": {code, message, status, details?}}`` envelope, with ``RetryInfo`` when given."""
    err: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": _STATUS_NAMES.get(status) or ("INTERNAL" if status >= 500 else "INVALID_ARGUMENT"),
    }
    details: list[dict[str, Any]] = []
    if "api key not valid" in message.lower():
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        )
    if status == 429:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    }
                ],
            }
        )
    if retry_after is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after}s"})
    if details:
        err["details"] = details
    return {"error": err}


def inband_error_body(message: str) -> dict[str, Any]:
    """The error object sent as a stream frame (or as a 200 body for a non-stream request)."""
    overloaded = "overload" in message.lower() or "unavailable" in message.lower()
    code, status = (503, "UNAVAILABLE") if overloaded else (500, "INTERNAL")
    return {"error": {"code": code, "message": message, "status": status}}
