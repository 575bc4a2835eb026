"""Who may use the Ollama routes: ``ollama.mode``, checked by the edge middleware instead of the
client-key check (a local Ollama server needs no key, so by default neither does this — but only for
this machine, including behind a local reverse proxy)."""

from __future__ import annotations

import ipaddress
from typing import Final

from aiohttp import web

from freellm.errors import ClientError
from freellm.server.auth import extract_api_key
from freellm.server.state import CLIENT, Gateway

__all__ = ["OLLAMA_PREFIX", "check_access"]

OLLAMA_PREFIX: Final = "/api/"


def _is_loopback(address: str | None) -> bool:
    if not address:
        return False
    try:
        return ipaddress.ip_address(address.strip().strip("[]").split("%")[0]).is_loopback
    except ValueError:
        return False


def check_access(request: web.Request, gw: Gateway) -> None:
    """``ollama.mode``: 404 when off; in ``loopback`` a remote peer — or a remote client forwarded by a
    local proxy (the first ``X-Forwarded-For`` hop) — gets 403; in ``key`` a client key is required.
    A valid client key is always bound to the request (its profile applies)."""
    mode = gw.settings.ollama.mode
    if mode == "off":
        raise ClientError(404, "Ollama emulation is disabled")
    key = extract_api_key(request)
    client = gw.client_keys.match(key) if key is not None else None
    if mode == "key":
        if client is None:
            raise ClientError(401, "invalid API key", type="authentication_error", code="invalid_api_key")
    else:
        forwarded = request.headers.get("X-Forwarded-For")
        first_hop = forwarded.split(",")[0] if forwarded else None
        if not _is_loopback(request.remote) or (first_hop is not None and not _is_loopback(first_hop)):
            raise ClientError(
                403, "Ollama emulation answers only this machine (ollama.mode: loopback)", type="permission_error"
            )
    if client is not None:
        request[CLIENT] = client
