"""The MCP protocol layer alone (freellm.mcp.protocol), against golden request/response fixtures.

Each ``tests/golden/mcp/<case>.json`` holds one POST — its headers and body (``body`` as JSON, or
``raw`` text for bodies that are not JSON) — and the reply the server must give: HTTP status and JSON
body (``null``: no body). ``server: gateway`` runs it against the gateway's real tool definitions
(calls that fail validation never reach a tool, so no gateway is needed); ``server: test`` against two
tools defined here, to pin what a successful call and a tool's refusal look like.

To add a case, write its request part and run with ``FREELLM_GOLDEN_WRITE=1``: the reply is filled in
from what the server answers now. Read the diff before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from freellm.mcp.http import SERVER
from freellm.mcp.protocol import (
    BATCH_VERSIONS,
    LATEST_VERSION,
    SUPPORTED_VERSIONS,
    McpServer,
    Tool,
    ToolError,
)
from freellm.mcp.tools import TOOLS, Caller

GOLDEN = Path(__file__).parent.parent / "golden" / "mcp"
CASES = sorted(GOLDEN.glob("*.json"))
WRITE = os.environ.get("FREELLM_GOLDEN_WRITE") == "1"


async def _echo(ctx: None, args: dict[str, Any]) -> dict[str, Any]:
    return {"echo": args}


async def _refuse(ctx: None, args: dict[str, Any]) -> dict[str, Any]:
    raise ToolError("The tool refused: nothing to do.")


_TEST_TOOLS: list[Tool[None]] = [
    Tool(
        name="echo",
        title="Echo",
        description="Returns its arguments.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        run=_echo,
    ),
    Tool(
        name="refuse",
        title="Refuse",
        description="Always a tool error.",
        input_schema={"type": "object"},
        run=_refuse,
    ),
]

_GATEWAY: McpServer[Caller] = McpServer(
    "freellm", "0.0.0-golden", TOOLS, title=SERVER.title, instructions=SERVER.instructions
)
_TEST: McpServer[None] = McpServer("golden", "1.0", _TEST_TOOLS)


async def _answer(case: dict[str, Any]) -> dict[str, Any]:
    raw = case["raw"].encode() if "raw" in case else orjson.dumps(case["body"])
    headers: dict[str, str] = case["headers"]
    if case["server"] == "test":
        reply = await _TEST.handle_post(raw, headers, None)
    else:
        # Only calls refused before a tool runs are gateway cases, so no Caller is ever used.
        reply = await _GATEWAY.handle_post(raw, headers, None)  # type: ignore[arg-type]
    encoded = reply.encoded()
    return {"status": reply.status, "body": None if encoded is None else json.loads(encoded)}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
async def test_golden(path: Path) -> None:
    case = json.loads(path.read_text())
    got = await _answer(case)
    if WRITE:
        case["reply"] = got
        path.write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
    assert got == case["reply"], case["description"]


def test_the_fixtures_cover_the_contract() -> None:
    """The golden set keeps every case the transport must get right (a deleted fixture fails here)."""
    names = {p.stem for p in CASES}
    for version in SUPPORTED_VERSIONS:
        assert f"initialize_{version}" in names
    required = {
        "initialize_unsupported",
        "ping",
        "tools_list_2025-11-25",
        "tools_call_ok",
        "tools_call_unknown_tool",
        "tools_call_bad_enum",
        "notification_initialized",
        "batch_2025-03-26",
        "batch_2025-06-18",
        "batch_2025-11-25",
        "parse_error",
        "not_an_object",
        "id_null",
    }
    assert required <= names, required - names


async def test_initialize_answers_each_supported_version_and_the_latest_otherwise() -> None:
    """The negotiation rule itself, beyond the fixtures: echo a spoken revision, else the latest."""
    for proposed in [*SUPPORTED_VERSIONS, "2023-01-01", "2026-07-28", "banana"]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": proposed}}
        reply = await _TEST.handle_post(orjson.dumps(body), {}, None)
        expected = proposed if proposed in SUPPORTED_VERSIONS else LATEST_VERSION
        assert reply.status == 200 and reply.body["result"]["protocolVersion"] == expected


async def test_batches_follow_the_version_header() -> None:
    batch = orjson.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    for version in SUPPORTED_VERSIONS:
        reply = await _TEST.handle_post(batch, {"MCP-Protocol-Version": version}, None)
        if version in BATCH_VERSIONS:
            assert (reply.status, reply.body) == (200, [{"jsonrpc": "2.0", "id": 1, "result": {}}])
        else:
            assert reply.status == 400 and reply.body["error"]["code"] == -32600 and reply.body["id"] is None


def test_every_gateway_tool_schema_is_a_valid_object_schema() -> None:
    for tool in TOOLS:
        assert tool.input_schema["type"] == "object" and tool.input_schema.get("additionalProperties") is False
        assert tool.validator().schema == tool.input_schema  # the schema itself is checked on first use


def test_a_broken_schema_is_refused_on_first_use() -> None:
    from jsonschema.exceptions import SchemaError

    broken = Tool(name="broken", title="b", description="b", input_schema={"type": 3}, run=_TEST_TOOLS[0].run)
    with pytest.raises(SchemaError):
        broken.validator()


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ValueError):
        McpServer("x", "1", [_TEST_TOOLS[0], _TEST_TOOLS[0]])
