"""``/mcp``: the MCP server over the Streamable HTTP transport, as a thin aiohttp handler.

The official ``mcp`` SDK's server side is an ASGI (Starlette) application with its own task groups and
session manager; hosting it inside aiohttp would need an ASGI bridge and a second concurrency model
for five small tools. The transport is therefore implemented to the spec in
:mod:`freellm.mcp.protocol` (sans I/O, golden-tested) and this module only does what needs the
request: authenticate, read the body, pass the caller on, write the :class:`Reply`.

Authentication is this handler's own (the edge middleware lets ``/mcp`` through): a client key, as on
``/v1``, or an admin key (``auth.admin_keys``), which alone may run ``set_routing_strategy``. A key that
is both is taken as the client key, as everywhere ("a client key is never an admin key"). Anything
else is a 401 with a JSON-RPC error body and ``WWW-Authenticate: Bearer``.

Only POST carries messages. The server offers no SSE stream (every answer is one JSON body) and keeps
no session, so GET and DELETE are 405 with ``Allow: POST`` — the spec's answer for both.
"""

from __future__ import annotations

from aiohttp import web

from freellm import __version__
from freellm.errors import ClientError, Exhausted
from freellm.mcp.protocol import INTERNAL_ERROR, INVALID_REQUEST, UNAUTHORIZED, McpServer, error_body
from freellm.mcp.tools import TOOLS, Caller
from freellm.server.auth import extract_api_key, key_matches
from freellm.server.errors import register_error_style
from freellm.server.state import BASE_HEADERS, GATEWAY

__all__ = ["MCP_PATH", "SERVER", "register"]

MCP_PATH = "/mcp"

SERVER: McpServer[Caller] = McpServer(
    "freellm",
    __version__,
    TOOLS,
    title="freellm gateway",
    instructions=(
        "Tools about this freellm gateway itself: which models are up (list_models), the providers and "
        "their keys' health (provider_health), usage from the request log (usage_summary), how a model "
        "would be routed now (routing_explain) and the response cache (cache_stats). "
        "set_routing_strategy changes the routing strategy live and needs an admin key."
    ),
)


def register(app: web.Application) -> None:
    app.router.add_route("*", MCP_PATH, mcp_endpoint)
    register_error_style(app, MCP_PATH, _jsonrpc_error)


def _jsonrpc_error(exc: ClientError | Exhausted) -> dict[str, object]:
    """Refusals raised before the protocol layer (401, 405, 413) in JSON-RPC's shape, as an MCP client
    expects on this path."""
    code = UNAUTHORIZED if exc.status == 401 else INTERNAL_ERROR if exc.status >= 500 else INVALID_REQUEST
    return error_body(code, exc.message)


def _caller(request: web.Request) -> Caller:
    gw = request.app[GATEWAY]
    key = extract_api_key(request)
    client = gw.client_keys.match(key) if key is not None else None
    admin = client is None and key is not None and bool(gw.admin_keys) and key_matches(key, gw.admin_keys)
    if client is None and not admin:
        raise ClientError(
            401,
            "Invalid API key: send a client key (or an admin key) as Authorization: Bearer.",
            type="authentication_error",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Caller(gw, client, admin)


async def mcp_endpoint(request: web.Request) -> web.StreamResponse:
    caller = _caller(request)
    if request.method != "POST":
        raise ClientError(
            405,
            "Method Not Allowed: this MCP server offers no SSE stream and no session; POST messages.",
            code="method_not_allowed",
            headers={"Allow": "POST"},
        )
    body = await request.read()  # server.body_limit_mb, as on /v1: past it a 413 (the edge renders it)
    reply = await SERVER.handle_post(body, request.headers, caller)
    base: dict[str, str] = request[BASE_HEADERS]
    headers = {**base, **reply.headers}
    payload = reply.encoded()
    if payload is None:
        return web.Response(status=reply.status, headers=headers)
    return web.Response(status=reply.status, body=payload, content_type="application/json", headers=headers)

