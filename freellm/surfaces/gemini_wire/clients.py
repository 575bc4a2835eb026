"""Who is calling: tell a Gemini client from an OpenAI one on the paths both use (``/v1/models…``).

Kept free of heavy imports so the edge middleware can use it.
"""

from __future__ import annotations

from aiohttp import web

__all__ = ["GEMINI_PREFIXES", "is_gemini_client", "query_key_allowed"]

GEMINI_PREFIXES = ("/v1beta/", "/v1/models/")
"""Path prefixes whose refusals are rendered in Gemini's error envelope."""


def is_gemini_client(request: web.Request) -> bool:
    """The request comes from a Gemini client: a ``/v1beta`` path, or a Google header
    (``x-goog-api-key``, ``x-goog-api-client``, which google-genai and Gemini CLI always send), or the
    key in ``?key=`` (Google's URL-key convention; OpenAI clients never use it)."""
    if request.path.startswith("/v1beta"):
        return True
    headers = request.headers
    return "x-goog-api-key" in headers or "x-goog-api-client" in headers or "key" in request.query


def query_key_allowed(path: str) -> bool:
    """``?key=`` is accepted only on the Gemini paths (``/v1beta/…`` and ``/v1/models…``)."""
    return path.startswith("/v1beta/") or path == "/v1beta" or path.startswith("/v1/models")
