"""``GET /admin/openapi.json``: the admin API described as an OpenAPI 3 document (admin keys only, like
every ``/admin/`` route). Built once per app from the table below, so a route added there is documented."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm import __version__
from freellm.admin.changes import json_reply

__all__ = ["register"]

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
    ("post", "/admin/compression/preview", "What compression would do to a chat request", None),
    ("get", "/admin/runtime", "Asyncio tasks, open fds, RSS, turns, leases and upstream pool connections now", None),
    ("get", "/admin/openapi.json", "This document", None),
)

_QUERY: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "/admin/requests": (
        ("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
        ("status", {"type": "string", "description": "status codes or classes, comma-separated: 429,5xx"}),
        ("route", {"type": "string", "description": "provider/model"}),
        ("since", {"type": "number", "description": "Unix seconds"}),
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

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "properties": {"error": {"type": "object", "properties": {"message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "string"}}}},
    },
    "Provider": {
        "type": "object",
        "required": ["name", "base_url"],
        "properties": {
            "name": {"type": "string"},
            "kind": {"type": "string", "enum": ["openai", "gemini", "anthropic"]},
            "base_url": {"type": "string", "format": "uri"},
            "keys": {"type": "array", "items": {"type": "string"}},
            "models": {"type": "array", "items": {"type": "object"}},
        },
    },
    "NewKey": {"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}}},
    "KeySwitch": {"type": "object", "required": ["enabled"], "properties": {"enabled": {"type": "boolean"}}},
    "Chain": {"type": "object", "required": ["chain"], "properties": {"chain": {"type": "array", "items": {"type": "string"}}}},
    "LiveSettings": {"type": "object", "additionalProperties": {"type": "object"}},
}


def register(app: web.Application) -> None:
    document = _document()

    async def openapi(request: web.Request) -> web.Response:
        return json_reply(request, document)

    app.router.add_get("/admin/openapi.json", openapi)


def _document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, body in _ROUTES:
        op: dict[str, Any] = {
            "summary": summary,
            "security": [{"bearer": []}, {"apiKey": []}],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
                "401": {"description": "Not an admin key", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            },
        }
        params = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        parameters = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params]
        if method == "get":
            parameters += [{"name": n, "in": "query", "required": False, "schema": schema} for n, schema in _QUERY.get(path, ())]
        if parameters:
            op["parameters"] = parameters
        if body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}}}
            op["responses"]["400"] = {"description": "Invalid request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
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
