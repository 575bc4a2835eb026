"""Client authentication: one of the configured keys, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import web

from freellm.config import ClientKeyConfig

__all__ = ["Client", "ClientKeys", "extract_admin_key", "extract_api_key", "key_matches"]


@dataclass(frozen=True, slots=True)
class Client:
    """Who is asking: which configured key (never the secret) and the profile it is bound to."""

    key_id: str
    """A stable, non-secret fingerprint of the key: scopes sessions so two users never share one."""
    profile: str | None


class ClientKeys:
    """The configured client keys, matched in constant time (every key compared, no early exit)."""

    def __init__(self, keys: Sequence[ClientKeyConfig]) -> None:
        self._secrets = [k.key.encode() for k in keys]
        self._clients = [
            Client(hashlib.sha256(k.key.encode()).hexdigest()[:16], k.profile) for k in keys
        ]

    @property
    def secrets(self) -> list[bytes]:
        return self._secrets

    def match(self, candidate: str) -> Client | None:
        given = _key_bytes(candidate)
        found = -1
        for i, key in enumerate(self._secrets):
            if hmac.compare_digest(given, key):
                found = i
        return self._clients[found] if found >= 0 else None


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
    given = _key_bytes(candidate)
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key)
    return ok


def _key_bytes(candidate: str) -> bytes:
    """A presented key as bytes to compare. A header that is not UTF-8 reaches us with its bytes as
    surrogate escapes, which a plain ``encode()`` refuses (a 500): ``surrogatepass`` turns them into
    bytes no configured key has, so such a key is simply wrong (401)."""
    return candidate.encode("utf-8", "surrogatepass")
