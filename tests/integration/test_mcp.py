"""Over the wire: ``POST /mcp`` on a real gateway and simulator, driven by the official ``mcp`` SDK's
client (``streamable_http_client`` + ``ClientSession``: initialize, list_tools, call_tool) and by plain
HTTP where the SDK would hide the transport's answers (401, 202, batches, parse errors, 405).

Every tool's result is checked against what the admin API answers for the same gateway at the same
moment: the MCP server must read the same truth, never a copy of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx2 as httpx
import mcp_types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from freellm.mcp.protocol import LATEST_VERSION
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import AUTH, MakeGateway, sdk

T = TypeVar("T")

ADMIN_KEY = "sk-mcp-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TOOL_NAMES = {"list_models", "provider_health", "usage_summary", "routing_explain", "cache_stats", "set_routing_strategy"}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def mcp_gateway(make_gateway: MakeGateway, **extra: Any) -> tuple[GatewayServer, str, str]:
    """Two providers whose models differ in tier, so a strategy change shows in routing."""
    small, big = unique("small"), unique("big")
    gw = make_gateway(
        {small: ["tiny-model"], big: ["huge-model"]},
        model_options={f"{small}/tiny-model": {"tier": "small"}, f"{big}/huge-model": {"tier": "frontier"}},
        extra={"auth": {"admin_keys": [ADMIN_KEY]}, **extra},
    )
    return gw, small, big


def with_session(gw: GatewayServer, key: str, work: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Connect the SDK's client with ``key`` as the Bearer token, initialize, run ``work``."""

    async def run() -> T:
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=15) as http,
            streamable_http_client(f"{gw.base_url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.protocol_version == LATEST_VERSION
            assert init.server_info.name == "freellm" and init.capabilities.tools is not None
            return await work(session)

    return asyncio.run(run())


def call(gw: GatewayServer, name: str, args: dict[str, Any] | None = None, key: str = CLIENT_KEY) -> mcp_types.CallToolResult:
    async def work(session: ClientSession) -> mcp_types.CallToolResult:
        return await session.call_tool(name, args or {})

    return with_session(gw, key, work)


def structured(result: mcp_types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def admin_json(gw: GatewayServer, path: str) -> Any:
    resp = httpx.get(f"{gw.base_url}{path}", headers=ADMIN, timeout=15)
    assert resp.status_code == 200, resp.text
    return resp.json()


def ask(gw: GatewayServer) -> str:
    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    return str(raw.headers["x-routed-via"])


def post(gw: GatewayServer, body: bytes | str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{gw.base_url}/mcp", content=body, headers={**JSON_HEADERS, **AUTH, **(headers or {})}, timeout=15
    )


# ---- the SDK's client -----------------------------------------------------------------------------------


def test_the_sdk_lists_every_tool_with_an_object_schema(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)

    async def work(session: ClientSession) -> mcp_types.ListToolsResult:
        assert isinstance(await session.send_ping(), mcp_types.EmptyResult)
        return await session.list_tools()

    listed = with_session(gw, CLIENT_KEY, work)
    assert {t.name for t in listed.tools} == TOOL_NAMES
    for tool in listed.tools:
        assert tool.input_schema["type"] == "object" and tool.description
    strategy = next(t for t in listed.tools if t.name == "set_routing_strategy")
    assert "smartest" in strategy.input_schema["properties"]["strategy"]["enum"]


def test_every_read_tool_answers_what_the_http_api_answers(make_gateway: MakeGateway) -> None:
    gw, small, big = mcp_gateway(make_gateway)
    assert ask(gw) == f"{small}/tiny-model"  # one request in the log

    models = structured(call(gw, "list_models"))
    assert models == httpx.get(f"{gw.v1}/models", headers=AUTH, timeout=15).json()
    assert {m["id"] for m in models["data"]} >= {"auto", "tiny-model", "huge-model"}
    assert all("available" in m for m in models["data"])
    only = structured(call(gw, "list_models", {"available_only": True}))
    assert only == httpx.get(f"{gw.v1}/models?available=true", headers=AUTH, timeout=15).json()

    health_result = call(gw, "provider_health")
    health = structured(health_result)
    assert health["providers"] == admin_json(gw, "/admin/providers")["data"]
    assert health["cooldowns"] == admin_json(gw, "/admin/cooldowns")["data"]
    keys = [k for p in health["providers"] for k in p["keys"]]
    assert len(keys) == 2 and all(k["masked"].startswith("…") and k["status"] in ("unknown", "healthy") for k in keys)
    text = "".join(c.text for c in health_result.content if isinstance(c, mcp_types.TextContent))
    for provider in (small, big):
        assert f"{provider}-key-1" not in text and f"{provider}-key-1" not in str(health)
    one = structured(call(gw, "provider_health", {"provider": big}))
    assert [p["name"] for p in one["providers"]] == [big]

    for window in ("1h", "24h", "7d", "30d"):
        usage = structured(call(gw, "usage_summary", {"window": window}))
        expected = admin_json(gw, f"/admin/analytics?window={window}")
        assert {k: v for k, v in usage.items() if k != "totals"} == expected
        assert usage["totals"]["requests"] == 1 and usage["totals"]["success_rate"] == 1.0
    default = structured(call(gw, "usage_summary"))
    assert default["window"] == "24h"
    [route] = default["routes"]
    assert route["route"] == f"{small}/tiny-model" and route["requests"] == 1
    assert default["totals"]["tokens_in"] == route["tokens_in"] > 0

    explain = structured(call(gw, "routing_explain", {"model": "auto", "tools": True, "tokens": 100}))
    assert explain == admin_json(gw, "/admin/routing/explain?model=auto&tools=true&tokens=100")
    assert explain["chosen"] == f"{small}/tiny-model"
    assert structured(call(gw, "routing_explain", {"model": "huge-model"}))["chosen"] == f"{big}/huge-model"

    assert structured(call(gw, "cache_stats")) == admin_json(gw, "/admin/cache/stats")


def test_a_tool_refusal_is_a_tool_error(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    unknown = call(gw, "routing_explain", {"model": "no-such-model"})
    assert unknown.is_error and unknown.structured_content is None
    bad = call(gw, "usage_summary", {"window": "1y"})
    assert bad.is_error
    text = bad.content[0]
    assert isinstance(text, mcp_types.TextContent) and "window" in text.text


def test_set_routing_strategy_needs_an_admin_key_and_applies_like_patch(make_gateway: MakeGateway) -> None:
    gw, small, big = mcp_gateway(make_gateway)
    refused = call(gw, "set_routing_strategy", {"strategy": "smartest"})
    assert refused.is_error
    first = refused.content[0]
    assert isinstance(first, mcp_types.TextContent) and "admin key" in first.text
    assert admin_json(gw, "/admin/settings")["routing"]["strategy"] == "priority"
    assert ask(gw) == f"{small}/tiny-model"

    applied = structured(call(gw, "set_routing_strategy", {"strategy": "smartest"}, key=ADMIN_KEY))
    assert applied["routing"]["strategy"] == "smart"
    assert admin_json(gw, "/admin/settings")["routing"] == applied["routing"]
    assert ask(gw) == f"{big}/huge-model"  # auto now routes by it
    stored = gw.run(gw.state.store.get_setting("admin_overlay"))
    assert stored is not None and '"strategy":"smartest"' in stored  # persisted like a PATCH

    junk = call(gw, "set_routing_strategy", {"strategy": "quickest"}, key=ADMIN_KEY)
    assert junk.is_error
    assert admin_json(gw, "/admin/settings")["routing"]["strategy"] == "smart"


def test_an_admin_key_may_use_the_read_tools_but_no_other_route(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    assert structured(call(gw, "cache_stats", key=ADMIN_KEY)) == admin_json(gw, "/admin/cache/stats")
    assert httpx.get(f"{gw.v1}/models", headers=ADMIN, timeout=15).status_code == 401
    assert httpx.get(f"{gw.base_url}/admin/settings", headers=AUTH, timeout=15).status_code == 401


def test_the_sdk_auto_mode_falls_back_to_the_handshake(make_gateway: MakeGateway) -> None:
    """``mcp.Client``'s default probes the 2026 ``server/discover`` first; this server answers it with a
    400 (an MCP-Protocol-Version it does not speak) and the client falls back to ``initialize``."""
    gw, _, _ = mcp_gateway(make_gateway)

    async def run() -> tuple[str | None, set[str]]:
        async with httpx.AsyncClient(headers=AUTH, timeout=15) as http:
            transport = streamable_http_client(f"{gw.base_url}/mcp", http_client=http)
            async with Client(transport, mode="auto") as client:
                tools = await client.list_tools()
                stats = await client.call_tool("cache_stats", {})
                assert not stats.is_error
                return client.session.protocol_version, {t.name for t in tools.tools}

    version, names = asyncio.run(run())
    assert version == LATEST_VERSION and names == TOOL_NAMES


# ---- the transport over plain HTTP ----------------------------------------------------------------------


def test_no_key_or_a_wrong_key_is_a_401(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    for headers in ({}, {"Authorization": "Bearer sk-wrong"}, {"Authorization": "Basic c2stdGVzdA=="}):
        resp = httpx.post(f"{gw.base_url}/mcp", content=ping, headers={**JSON_HEADERS, **headers}, timeout=15)
        assert resp.status_code == 401, headers
        assert resp.headers["WWW-Authenticate"] == "Bearer"
        assert resp.json()["error"]["code"] == -32001 and resp.json()["id"] is None
    assert httpx.get(f"{gw.base_url}/mcp", timeout=15).status_code == 401
    assert post(gw, ping).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_notification_is_a_202_with_no_body(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    resp = post(gw, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', {"MCP-Protocol-Version": "2025-06-18"})
    assert resp.status_code == 202 and resp.content == b""


def test_a_batch_is_served_or_refused_by_the_version(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    batch = b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/initialized"}]'
    served = post(gw, batch)  # no MCP-Protocol-Version: 2025-03-26, which has batches
    assert served.status_code == 200 and served.json() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    for version in ("2025-06-18", "2025-11-25"):
        refused = post(gw, batch, {"MCP-Protocol-Version": version})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32600 and refused.json()["id"] is None


def test_malformed_json_is_a_parse_error(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    resp = post(gw, '{"jsonrpc": "2.0", "id": 1, "method": ')
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == -32700 and resp.json()["id"] is None


def test_get_and_delete_are_405_no_stream_no_session(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway)
    for method in ("GET", "DELETE"):
        resp = httpx.request(method, f"{gw.base_url}/mcp", headers={**AUTH, "Accept": "text/event-stream"}, timeout=15)
        assert resp.status_code == 405, method
        assert resp.headers["Allow"] == "POST" and resp.json()["error"]["code"] == -32600
    init = post(gw, b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}')
    assert init.status_code == 200 and "Mcp-Session-Id" not in init.headers
    assert init.json()["result"]["protocolVersion"] == "2025-06-18"


def test_a_body_past_the_limit_is_a_413(make_gateway: MakeGateway) -> None:
    gw, _, _ = mcp_gateway(make_gateway, server={"ip_rate_limit_rpm": 0, "body_limit_mb": 0.01})
    padding = "x" * 20_000
    resp = post(gw, f'{{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {{"pad": "{padding}"}}}}')
    assert resp.status_code == 413 and resp.json()["error"]["code"] == -32600
