"""Client authentication: one of the configured keys, compared in constant time."""

from __future__ import annotations

import hmac

from aiohttp import web

__all__ = ["extract_admin_key", "extract_api_key", "key_matches"]


def extract_api_key(request: web.Request) -> str | None:
    """Authorization Bearer, else ``x-api-key`` (Anthropic SDKs), else ``x-goog-api-key`` (Gemini)."""
    auth = request.headers.get("Authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return request.headers.get("x-api-key") or request.headers.get("x-goog-api-key") or None


def extract_admin_key(request: web.Request) -> str | None:
    """Admin keys travel as ``Authorization: Bearer`` or ``x-api-key`` only."""
    auth = request.headers.get("Authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return request.headers.get("x-api-key") or None


def key_matches(candidate: str, keys: list[bytes]) -> bool:
    """Constant-time comparison against every configured key (no early exit on a match)."""
    given = candidate.encode()
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key)
    return ok
