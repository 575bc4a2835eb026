"""``GET /admin/openapi.json``: the admin API described as an OpenAPI 3 document (admin keys only, like
every ``/admin/`` route). Built once per app from the table below, so a route added there is documented."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm import __version__
from freellm.admin.changes import json_reply
from freellm.admin.live import LIVE_FIELDS

__all__ = ["document", "register"]

_ROUTES: tuple[tuple[str, str, str, str | None], ...] = (
    ("get", "/admin/providers", "Providers and their keys (masked), models and key statuses", None),
    ("post", "/admin/providers", "Add a provider (shaped like a YAML provider; keys go to the vault)", "Provider"),
    ("post", "/admin/providers/{name}/keys", "Add a key to a provider (stored encrypted)", "NewKey"),
    ("patch", "/admin/providers/{name}/keys/{key_id}", "Enable or disable a key", "KeySwitch"),
    ("delete", "/admin/providers/{name}/keys/{key_id}", "Remove a key added at run time", None),
    ("post", "/admin/providers/{name}/keys/{key_id}/test", "Check a key with one cheap upstream call", None),
    ("get", "/admin/chain", "The chain auto tries", None),
    ("put", "/admin/chain", "Replace the chain", "Chain"),
    ("get", "/admin/settings", "Settings that are safe to change live", None),
    ("patch", "/admin/settings", "Change live settings", "LiveSettings"),
    ("get", "/admin/requests", "The request log, newest first (no message bodies unless logging.bodies)", None),
    ("get", "/admin/analytics", "Per-route statistics over a window of the request log, computed in SQL", None),
    ("get", "/admin/cooldowns", "Keys and routes cooling down now, and until when", None),
    ("get", "/admin/routing/explain", "How a request for a model would be routed now", None),
    ("get", "/admin/cache/stats", "Response-cache counters", None),
    ("delete", "/admin/cache", "Drop every cache entry", None),
    ("get", "/admin/compression/stats", "Compression counters", None),
    ("post", "/admin/compression/preview", "What compression would do to a chat request", "CompressionPreview"),
    ("get", "/admin/runtime", "Asyncio tasks, open fds, RSS, turns, leases and upstream pool connections now", None),
    ("get", "/admin/openapi.json", "This document", None),
)

_QUERY: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "/admin/requests": (
        ("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
        (
            "status",
            {
                "type": "string",
                "pattern": "^\\s*([1-5][0-9][0-9]|[1-5][xX][xX])\\s*(,\\s*([1-5][0-9][0-9]|[1-5][xX][xX])\\s*)*$",
                "description": "status codes or classes, comma-separated: 429,5xx",
            },
        ),
        ("route", {"type": "string", "pattern": "\\S", "description": "provider/model"}),
        ("since", {"type": "number", "minimum": 0, "description": "Unix seconds"}),
    ),
    "/admin/analytics": (("window", {"type": "string", "enum": ["1h", "24h", "7d", "30d"]}),),
    "/admin/routing/explain": (
        ("model", {"type": "string", "default": "auto"}),
        ("profile", {"type": "string"}),
        ("tokens", {"type": "integer", "minimum": 0}),
        ("tools", {"type": "boolean"}),
        ("vision", {"type": "boolean"}),
    ),
}
"""The query parameters of the GET routes that take some."""

_CREATED: frozenset[tuple[str, str]] = frozenset(
    {("post", "/admin/providers"), ("post", "/admin/providers/{name}/keys")}
)
"""Operations that answer 201 (what they made), not 200."""
_CONFLICTS: dict[tuple[str, str], str] = {
    ("post", "/admin/providers"): "A provider with that name exists",
    ("post", "/admin/providers/{name}/keys"): "The provider already has that key",
    ("delete", "/admin/providers/{name}/keys/{key_id}"): "The key comes from the configuration file or environment",
    ("post", "/admin/providers/{name}/keys/{key_id}/test"): "The provider is disabled",
}
_NOT_FOUND: dict[str, str] = {"/admin/routing/explain": "No such profile"}
"""Routes without path parameters that still answer 404 (for a query parameter naming nothing)."""

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "properties": {"error": {"type": "object", "properties": {"message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "string"}}}},
    },
    "Provider": {
        "type": "object",
        "required": ["name", "base_url"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "pattern": "^[^/:]+$"},
            "kind": {"type": "string", "enum": ["openai", "gemini", "anthropic"]},
            "base_url": {"type": "string", "format": "uri"},
            "keys": {"type": "array", "items": {"type": "string"}},
            "models": {"type": "array", "items": {"type": "object"}},
        },
    },
    "NewKey": {
        "type": "object",
        "required": ["key"],
        "properties": {"key": {"type": "string", "description": "one word: no whitespace or control characters inside", "pattern": "\\S"}},
    },
    "KeySwitch": {"type": "object", "required": ["enabled"], "properties": {"enabled": {"type": "boolean"}}},
    "Chain": {
        "type": "object",
        "required": ["chain"],
        "properties": {"chain": {"type": "array", "items": {"type": "string", "pattern": "\\S"}}},
    },
    "LiveSettings": {
        "type": "object",
        "properties": {section: {"type": "object"} for section in LIVE_FIELDS},
        "additionalProperties": False,
    },
    "CompressionPreview": {
        "type": "object",
        "required": ["messages"],
        "properties": {
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["role"],
                    "properties": {"role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool", "function"]}},
                },
            },
            "mode": {"type": "string", "nullable": True, "enum": ["off", "lossless", "standard", "aggressive", None]},
        },
    },
}


_ERROR: dict[str, Any] = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def register(app: web.Application) -> None:
    doc = document()

    async def openapi(request: web.Request) -> web.Response:
        return json_reply(request, doc)

    app.router.add_get("/admin/openapi.json", openapi)


def document() -> dict[str, Any]:
    """The OpenAPI document (also what the fuzz suite hands schemathesis, tests/fuzz)."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, body in _ROUTES:
        op: dict[str, Any] = {
            "summary": summary,
            "security": [{"bearer": []}, {"apiKey": []}],
            "responses": {
                "201" if (method, path) in _CREATED else "200": {
                    "description": "Created" if (method, path) in _CREATED else "OK",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "401": {"description": "Not an admin key", "content": _ERROR},
            },
        }
        if (method, path) in _CONFLICTS:
            op["responses"]["409"] = {"description": _CONFLICTS[method, path], "content": _ERROR}
        params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        parameters = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params]
        if method == "get":
            parameters += [{"name": n, "in": "query", "required": False, "schema": schema} for n, schema in _QUERY.get(path, ())]
        if parameters:
            op["parameters"] = parameters
        if params or path in _NOT_FOUND:  # an unknown provider or key (or profile)
            op["responses"]["404"] = {"description": _NOT_FOUND.get(path, "No such provider or key"), "content": _ERROR}
        if body is not None or len(parameters) > len(params):  # a body or a query parameter to refuse
            op["responses"]["400"] = {"description": "Invalid request", "content": _ERROR}
        if body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}}}
            op["responses"]["413"] = {"description": "Body over server.admin_body_limit_kb"}
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.0.3",
        "info": {"title": "freellm admin API", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
    }
