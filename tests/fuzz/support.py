"""The fuzz suite's shared machinery: the example budget, one long-lived gateway per module, raw HTTP,
the invariants every reply must keep, and the records that must survive the fuzzing unchanged.

Why one gateway per module and not one per example: hypothesis runs hundreds of examples and starting a
gateway costs a store, a vault and a client pool each time; worse, a fresh gateway per example could
never show that a hostile request *left something behind* (a dead worker, a corrupted record). So each
module starts one gateway, seeds records, fuzzes it, and checks the records at the end.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx2 as httpx
import orjson
from hypothesis import HealthCheck, settings

from freellm.sim import SimServer
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway

__all__ = [
    "ADMIN_KEY",
    "CHAT_MODEL",
    "EMBED_MODEL",
    "KEEP_MODEL",
    "FuzzGateway",
    "RawReply",
    "Surface",
    "assert_records_intact",
    "budget",
    "check_no_fault",
    "check_reply",
    "fuzz_gateway",
    "fuzz_settings",
    "parse_raw_replies",
    "seed_records",
]

ADMIN_KEY: Final = "sk-admin-fuzz"
CHAT_MODEL: Final = "model-x"
EMBED_MODEL: Final = "embed-x"
KEEP_MODEL: Final = "model-keep"
"""Served only by the ``keep`` provider, which no fuzzed request routes to: its request-log rows are the
seeded ones and nothing else, so they can be compared byte for byte after the fuzzing."""

_EXAMPLES_ENV: Final = "FREELLM_FUZZ_EXAMPLES"


def budget(default: int) -> int:
    """Examples per fuzz test: ``default`` in the normal run (the whole suite stays under a minute),
    ``FREELLM_FUZZ_EXAMPLES`` when set (e.g. 5000 for a long hunt)."""
    raw = os.environ.get(_EXAMPLES_ENV, "").strip()
    return int(raw) if raw else default


def fuzz_settings(default: int) -> settings:
    """Hypothesis settings for a test that drives a live gateway: no deadline (a request's latency is the
    loopback's, not the code's), the slow-data checks off (huge and deep values are the point), and the
    examples from :func:`budget`. The default run (the README's test command, CI's) is derandomized:
    the same examples every time, so a green suite stays green; asking for more examples
    (``FREELLM_FUZZ_EXAMPLES``) explores new ones each run."""
    return settings(
        max_examples=budget(default),
        derandomize=not os.environ.get("FREELLM_FUZZ_EXAMPLES"),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


@dataclass(frozen=True)
class RawReply:
    """An HTTP answer as read off the socket: nothing normalised, so a CR/LF that leaked into a header
    would show up as an extra header line."""

    status: int
    header_lines: list[bytes]
    body: bytes

    def header(self, name: str) -> list[str]:
        prefix = name.lower().encode() + b":"
        return [line[len(prefix) :].strip().decode("latin-1") for line in self.header_lines if line.lower().startswith(prefix)]


class _ErrorLog(logging.Handler):
    """Collects every ``freellm`` log record that carries a traceback: the gateway logs one exactly when
    an exception escaped a handler or a background task — a bug even when the client saw a 4xx."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is not None:
            self.records.append(record)

    @staticmethod
    def describe(records: list[logging.LogRecord]) -> list[str]:
        """Each record's message and the tail of its traceback (where the exception was raised)."""
        formatter = logging.Formatter()
        return [f"{r.getMessage()}\n{formatter.formatException(r.exc_info)[-1500:]}" for r in records if r.exc_info]


@dataclass
class FuzzGateway:
    server: GatewayServer
    client: httpx.Client
    errors: _ErrorLog
    seeded: dict[str, Any] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return self.server.port

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_KEY}"}

    def post(self, path: str, content: bytes, headers: Mapping[str, str] | None = None) -> httpx.Response:
        """POST raw bytes (already-serialised JSON, or not JSON at all) with the client key."""
        return self.client.post(path, content=content, headers={"Content-Type": "application/json", **(headers or {})})

    def raw(self, request: bytes, *, timeout: float = 30.0) -> list[RawReply]:
        """Send ``request`` (whole HTTP/1.1 requests, heads and bodies) on a fresh socket and read every
        answer until the server closes: for what httpx refuses to send (CR/LF in a header value, bytes
        that are not Latin-1). A CR/LF that ends the head early makes the rest a second, pipelined
        request, so there may be more than one answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(request)
            chunks: list[bytes] = []
            while True:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:  # the server dropped the rest of a request it refused
                    break
                if not data:
                    break
                chunks.append(data)
        return parse_raw_replies(b"".join(chunks))

    def check(self, envelope: str, reply: httpx.Response) -> None:
        """:func:`check_reply` on ``reply``, and no traceback logged while it was served."""
        logged, self.errors.records = self.errors.records, []
        assert not logged, "\n".join(self.errors.describe(logged))
        check_reply(envelope, reply.status_code, reply.content, content_type=reply.headers.get("content-type", ""))

    def assert_healthy(self) -> None:
        """The worker still answers, and nothing logged a traceback."""
        reply = self.client.get("/health")
        assert reply.status_code == 200, reply.text
        assert orjson.loads(reply.content)["status"] == "ok"
        assert not self.errors.records, "\n".join(self.errors.describe(self.errors.records))


def parse_raw_replies(data: bytes) -> list[RawReply]:
    """Split raw HTTP/1.1 answers into status, header lines and body each (bodies cut by their
    Content-Length, or de-chunked)."""
    replies: list[RawReply] = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"no complete response head: {data[:200]!r}"
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        reply = RawReply(status, lines[1:], b"")
        if any(line.lower() == b"transfer-encoding: chunked" for line in reply.header_lines):
            body, data = _dechunk(rest)
        else:
            length = reply.header("content-length")
            size = int(length[0]) if length else len(rest)
            body, data = rest[:size], rest[size:]
        replies.append(RawReply(status, reply.header_lines, body))
    return replies


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    """(the de-chunked body, what follows it)."""
    out = bytearray()
    while True:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return bytes(out), rest.partition(b"\r\n")[2]
        out += rest[:size]
        data = rest[size + 2 :]


@dataclass(frozen=True)
class Surface:
    """One inbound wire: where it is, a valid body, and the envelope its errors come in."""

    name: str
    path: str
    valid: dict[str, Any]
    envelope: str
    """``openai`` | ``anthropic`` | ``gemini`` | ``ollama`` | ``mcp``."""
    headers: Mapping[str, str] = field(default_factory=dict)


_TRACEBACK = re.compile(rb"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")


def check_no_fault(status: int, body: bytes) -> None:
    """No 5xx and no traceback or source path in the body: what holds for *every* answer, even the
    HTTP parser's own plain-text refusal of a request that never reached the gateway."""
    assert status < 500, f"{status}: {body[:500]!r}"
    assert not _TRACEBACK.search(body), body[:2000]


def check_reply(envelope: str, status: int, body: bytes, *, content_type: str = "") -> None:
    """The invariants of one reply to fuzzed input.

    * never a 5xx: with a healthy simulator behind the gateway, malformed input is the client's fault;
    * never a traceback or a source path in the body;
    * a refusal is in the surface's own envelope, so the client's SDK can read it.
    """
    check_no_fault(status, body)
    if envelope == "mcp":
        _check_mcp(status, body)
        return
    if status < 400:
        return
    assert "json" in content_type, (status, content_type, body[:300])
    doc = orjson.loads(body)
    assert isinstance(doc, dict), doc
    if envelope == "openai":
        err = doc.get("error")
        assert isinstance(err, dict) and isinstance(err.get("message"), str) and isinstance(err.get("type"), str), doc
    elif envelope == "anthropic":
        err = doc.get("error")
        assert doc.get("type") == "error" and isinstance(err, dict), doc
        assert isinstance(err.get("type"), str) and isinstance(err.get("message"), str), doc
    elif envelope == "gemini":
        err = doc.get("error")
        assert isinstance(err, dict) and err.get("code") == status, doc
        assert isinstance(err.get("status"), str) and isinstance(err.get("message"), str), doc
    elif envelope == "ollama":
        assert isinstance(doc.get("error"), str), doc
    else:  # pragma: no cover - a typo in a test
        raise AssertionError(f"unknown envelope {envelope!r}")


def _check_mcp(status: int, body: bytes) -> None:
    """MCP over Streamable HTTP: a notification or a client response is 202 with no body; everything
    else is one JSON-RPC message (or a batch of them) — a refusal an HTTP 4xx carrying a JSON-RPC error."""
    if status == 202:
        assert body == b"", body[:300]
        return
    doc = orjson.loads(body)
    messages = doc if isinstance(doc, list) else [doc]
    assert messages, doc
    for message in messages:
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", doc
        assert ("result" in message) != ("error" in message), doc
        if "error" in message:
            err = message["error"]
            assert isinstance(err, dict) and isinstance(err.get("code"), int) and isinstance(err.get("message"), str), doc
    if status >= 400:
        assert all("error" in m for m in messages), doc


def fuzz_gateway(bg: BackgroundLoop, sim: SimServer, data_dir: Path, name: str) -> Iterator[FuzzGateway]:
    """Start one gateway for a fuzz module: a chat model and an embedding model on a simulated provider
    (``fz-<name>``), a second provider (``keep-<name>``) serving :data:`KEEP_MODEL`, an admin key; yield
    it with a keep-alive client and the traceback collector attached; close both at the end."""
    fz, keep = f"fz-{name}", f"keep-{name}"
    config = gateway_settings(
        data_dir,
        sim.base_url,
        {fz: [CHAT_MODEL, EMBED_MODEL], keep: [KEEP_MODEL]},
        chain=[f"{fz}/{CHAT_MODEL}"],
        model_options={f"{fz}/{EMBED_MODEL}": {"kind": "embedding"}},
        extra={"auth": {"admin_keys": [ADMIN_KEY]}, "health": {"key_check_s": 0, "cooldown_probe_s": 0}},
    )
    server = start_gateway(bg, config)
    errors = _ErrorLog()
    logger = logging.getLogger("freellm")
    logger.addHandler(errors)
    client = httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {CLIENT_KEY}"}, timeout=60)
    try:
        yield FuzzGateway(server, client, errors)
    finally:
        logger.removeHandler(errors)
        client.close()
        server.close()


def seed_records(fg: FuzzGateway) -> None:
    """Records that must come out of the fuzzing byte-identical: a stored Responses object, a provider
    key added through the admin API, and request-log rows (on the ``keep`` route only)."""
    made = fg.client.post("/v1/responses", json={"model": KEEP_MODEL, "input": "remember me", "store": True})
    assert made.status_code == 200, made.text
    response_id = made.json()["id"]
    provider = next(p for p in fg.server.state.settings.providers if p.name.startswith("keep-"))
    added = fg.client.post(
        f"/admin/providers/{provider.name}/keys", json={"key": "sk-seeded-key-0001"}, headers=fg.admin_headers()
    )
    assert added.status_code in (200, 201), added.text
    for n in range(3):
        chat = fg.client.post(
            "/v1/chat/completions", json={"model": KEEP_MODEL, "messages": [{"role": "user", "content": f"seed {n}"}]}
        )
        assert chat.status_code == 200, chat.text
    route = f"{provider.name}/{KEEP_MODEL}"
    rows = _wait_for_rows(fg, route, 4)
    fg.seeded = {
        "response_id": response_id,
        "response": fg.client.get(f"/v1/responses/{response_id}").content,
        "provider": provider.name,
        "keys": _provider_keys(fg, provider.name),
        "route": route,
        "rows": rows,
    }


def _provider_keys(fg: FuzzGateway, name: str) -> bytes:
    listed = fg.client.get("/admin/providers", headers=fg.admin_headers())
    assert listed.status_code == 200, listed.text
    entry = next(p for p in listed.json()["data"] if p["name"] == name)
    return orjson.dumps(entry["keys"], option=orjson.OPT_SORT_KEYS)


def _rows(fg: FuzzGateway, route: str) -> list[Any]:
    reply = fg.client.get("/admin/requests", params={"route": route, "limit": "1000"}, headers=fg.admin_headers())
    assert reply.status_code == 200, reply.text
    rows: list[Any] = reply.json()["data"]
    return rows


def _wait_for_rows(fg: FuzzGateway, route: str, count: int) -> bytes:
    """The route's rows once ``count`` of them are written (the log is written after each reply is sent,
    so the last one may land a moment after its reply)."""
    deadline = time.monotonic() + 10
    while True:
        rows = _rows(fg, route)
        if len(rows) >= count or time.monotonic() > deadline:
            assert len(rows) == count, rows
            return orjson.dumps(rows)
        fg.server.run(_yield_loop())


async def _yield_loop() -> None:
    """One trip through the servers' loop: lets a pending request-log write run before the next read."""


def assert_records_intact(fg: FuzzGateway) -> None:
    """Every seeded record reads back exactly as it did before the fuzzing."""
    seeded = fg.seeded
    assert fg.client.get(f"/v1/responses/{seeded['response_id']}").content == seeded["response"]
    assert _provider_keys(fg, seeded["provider"]) == seeded["keys"]
    assert orjson.dumps(_rows(fg, seeded["route"])) == seeded["rows"]
