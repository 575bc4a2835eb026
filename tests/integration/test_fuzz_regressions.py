"""Over-the-wire regression tests for faults the fuzz suite (tests/fuzz, docs/fuzzing.md) found, each
named after its fault (the parser-level ones are in tests/unit/test_fuzz_regressions.py)."""

from __future__ import annotations

import socket

import httpx2 as httpx
import orjson
import pytest

from tests.fuzz.support import RawReply, parse_raw_replies
from tests.harness import GatewayServer
from tests.integration.helpers import MakeGateway, one_route

ADMIN_KEY = "sk-admin-regress"


@pytest.mark.parametrize("flag", ["tools", "vision"])
def test_routing_explain_non_boolean_flag_is_400(make_gateway: MakeGateway, flag: str) -> None:
    """``vision=null`` (or any word but true/false/1/0/yes/no) was read as false: the explanation then
    answered a question the caller had not asked."""
    gw, _ = one_route(make_gateway, extra={"auth": {"admin_keys": [ADMIN_KEY]}})
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    bad = httpx.get(f"{gw.base_url}/admin/routing/explain", params={flag: "null"}, headers=headers)
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["param"] == flag
    good = httpx.get(f"{gw.base_url}/admin/routing/explain", params={flag: "False"}, headers=headers)
    assert good.status_code == 200, good.text


def _raw(gw: GatewayServer, head: bytes, body: bytes = b"") -> RawReply:
    """One request written byte for byte (httpx refuses a header that is not Latin-1 text)."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    (reply,) = parse_raw_replies(data)
    return reply


@pytest.mark.parametrize(
    ("path", "header", "envelope_key"),
    [
        ("/v1/chat/completions", b"Authorization: Bearer sk-test-client\xff\xfe", "error"),
        ("/v1/messages", b"x-api-key: \xc0\x80key", "type"),
        ("/admin/providers", b"Authorization: Bearer \xed\xa0\x80", "error"),
        ("/mcp", b"Authorization: Bearer \xff", "jsonrpc"),
    ],
)
def test_api_key_header_with_invalid_utf8_is_401(
    make_gateway: MakeGateway, path: str, header: bytes, envelope_key: str
) -> None:
    """A key header holding bytes that are not UTF-8 reached ``str.encode()`` as surrogate escapes and
    raised UnicodeEncodeError: a 500 instead of the 401 a wrong key gets."""
    gw, _ = one_route(make_gateway, extra={"auth": {"admin_keys": [ADMIN_KEY]}})
    method = b"GET" if path.startswith("/admin/") else b"POST"
    head = method + b" " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    if path == "/mcp":
        head += b"Accept: application/json, text/event-stream\r\n"
    reply = _raw(gw, head + header + b"\r\n", b'{"jsonrpc":"2.0","id":1,"method":"ping"}' if path == "/mcp" else b"{}")
    assert reply.status == 401, (reply.status, reply.body)
    assert envelope_key in orjson.loads(reply.body)
