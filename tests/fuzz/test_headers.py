"""Header injection: hostile values in every request header the gateway reads, sent on a raw socket
(httpx refuses CR/LF and non-Latin-1 bytes in a header, which is exactly what is fuzzed here).

Invariants, on every answer read off the socket (a CR/LF that ends the head early turns the rest into a
second, pipelined request, so there may be two): no 5xx; no traceback; no header line the client wrote
ever comes back as a response header (no response splitting); the echoed ``X-Request-ID`` is visible
ASCII only; an answer the gateway itself wrote (it carries ``X-Request-ID``) is in the path's envelope.
A request so malformed that aiohttp's HTTP parser refuses it never reaches the gateway: its 400 is
plain text, and only the first three invariants apply to it.
"""

from __future__ import annotations

from typing import Final

import orjson
from hypothesis import given, note
from hypothesis import strategies as st

from tests.fuzz.support import (
    ADMIN_KEY,
    CHAT_MODEL,
    FuzzGateway,
    RawReply,
    assert_records_intact,
    check_no_fault,
    check_reply,
    fuzz_settings,
)
from tests.fuzz.surfaces import MCP_HEADERS
from tests.harness import CLIENT_KEY

_CHAT = orjson.dumps({"model": CHAT_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": False})
_TARGETS: Final = (
    ("POST", "/v1/chat/completions", _CHAT, "openai"),
    ("POST", "/v1/responses", orjson.dumps({"model": CHAT_MODEL, "input": "hi", "store": False}), "openai"),
    ("POST", "/v1/messages", orjson.dumps({"model": CHAT_MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}), "anthropic"),
    ("POST", f"/v1beta/models/{CHAT_MODEL}:generateContent", orjson.dumps({"contents": [{"parts": [{"text": "hi"}]}]}), "gemini"),
    ("POST", "/api/chat", orjson.dumps({"model": CHAT_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": False}), "ollama"),
    ("POST", "/mcp", orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}), "mcp"),
    ("GET", "/admin/providers", b"", "openai"),
    ("GET", "/v1/models", b"", "openai"),
)
_HEADERS: Final = (
    "X-Request-ID",
    "X-Session-Id",
    "X-FreeLLM-Cache",
    "X-FreeLLM-Compress",
    "X-FreeLLM-Fusion",
    "X-FreeLLM-Profile",
    "Cache-Control",
    "Authorization",
    "x-api-key",
    "x-goog-api-key",
    "MCP-Protocol-Version",
    "Accept",
    "Content-Type",
    "X-Forwarded-For",
)
_INJECTIONS: Final = (
    b"\r\nX-Injected: 1",
    b"\nX-Injected: 1",
    b"\rX-Injected: 1",
    b"\r\n\r\nX-Injected: 1",
    b"%0d%0aX-Injected: 1",
    b"\x00",
    b"\x7f",
    b"\xff\xfe",
    "é ☃ \U0001f600".encode(),
    b"\xed\xa0\x80",
    b"\x0b\x0c",
    b"x" * 9000,
)


@st.composite
def _header_value(draw: st.DrawFn) -> bytes:
    """A value built from plain text, injection attempts and raw bytes, in any order."""
    pieces = draw(
        st.lists(
            st.one_of(
                st.sampled_from(_INJECTIONS),
                st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
                st.binary(max_size=8),
                st.sampled_from((b"Bearer " + CLIENT_KEY.encode(), b"on", b"no-store", b"abc-123", b"2025-06-18")),
            ),
            min_size=1,
            max_size=4,
        )
    )
    return b"".join(pieces)


def _request(method: str, path: str, body: bytes, name: str, value: bytes) -> bytes:
    key = ADMIN_KEY if path.startswith("/admin/") else CLIENT_KEY
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    if name.lower() != "authorization":
        lines.append(f"Authorization: Bearer {key}".encode())
    if name.lower() != "content-type":
        lines.append(b"Content-Type: application/json")
    if path == "/mcp" and name.lower() != "accept":
        lines.append(f"Accept: {MCP_HEADERS['Accept']}".encode())
    lines.append(f"Content-Length: {len(body)}".encode())
    lines.append(name.encode() + b": " + value)  # last, so an early end of the head keeps the length
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _check(reply: RawReply, envelope: str) -> None:
    assert reply.status < 500, (reply.status, reply.body[:300])
    assert not any(line.lower().startswith(b"x-injected") for line in reply.header_lines), reply.header_lines
    echoed = reply.header("x-request-id")
    for value in echoed:
        assert 1 <= len(value) <= 128 and value.isascii() and value.isprintable() and " " not in value, value
    if echoed:  # written by the gateway, not refused by the HTTP parser
        content_type = ",".join(reply.header("content-type"))
        check_reply(envelope, reply.status, reply.body, content_type=content_type)
    else:
        check_no_fault(reply.status, reply.body)


@fuzz_settings(150)
@given(target=st.sampled_from(_TARGETS), name=st.sampled_from(_HEADERS), value=_header_value())
def test_hostile_header_values(fuzzed: FuzzGateway, target: tuple[str, str, bytes, str], name: str, value: bytes) -> None:
    method, path, body, envelope = target
    request = _request(method, path, body, name, value)
    note(f"request: {request!r}")
    replies = fuzzed.raw(request, timeout=20)
    assert replies, "no answer at all"
    logged, fuzzed.errors.records = fuzzed.errors.records, []
    assert not logged, "\n".join(fuzzed.errors.describe(logged))
    for reply in replies:
        _check(reply, envelope)


def test_gateway_is_whole_after_header_fuzzing(fuzzed: FuzzGateway) -> None:
    """Runs after the header fuzzing in this module: the worker answers and the seeded records are intact."""
    fuzzed.assert_healthy()
    assert_records_intact(fuzzed)
