"""The cache key: SHA-256 over everything that can change an answer or its bytes.

Built by destructuring *every* field rather than picking a list: the canonical request's full upstream
body (model as asked — absent → ``auto`` —, the messages after compression, profile prompt and image
shrink, every sampling knob, tools, tool choice, response format, unknown fields the client sent and
``stream_options``), plus what is not in the body but changes the reply: the inbound surface, whether it
streams (a stream hit replays that surface's bytes), the surface's own rendering inputs (``variant``:
e.g. the model name Anthropic echoes, Gemini's SSE or JSON-array framing) and the compression
fingerprint (mode and configuration), so two compression settings never share an entry. The route is
not part of the key: any route's answer to the same request is the answer.
"""

from __future__ import annotations

import hashlib

import orjson

from freellm.core.request import ChatRequest

__all__ = ["KEY_VERSION", "cache_key", "eligible"]

KEY_VERSION = 1
"""Bumped whenever the key's inputs change, so entries of an older layout simply miss."""


def cache_key(req: ChatRequest, *, surface: str, variant: str, compression: str) -> str:
    body = req.upstream_body(req.requested_model, stream=req.stream)
    material = {
        "v": KEY_VERSION,
        "surface": surface,
        "variant": variant,
        "compression": compression,
        "body": body,
    }
    return hashlib.sha256(orjson.dumps(material, option=orjson.OPT_SORT_KEYS)).hexdigest()


def eligible(req: ChatRequest, max_temperature: float) -> bool:
    """Temperature unset or at most ``max_temperature``: a hotter request wants a new answer each time."""
    return req.temperature is None or req.temperature <= max_temperature
