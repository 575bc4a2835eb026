"""Over the wire: the security pass (docs/security.md) — one test per mitigation of the threat model.

Every test starts a real gateway on loopback. Frames a well-behaved client library would never send
(a lying ``Content-Length``, a bare CR in a header, garbage for a request line) go over a raw socket;
the rest over httpx. Log output is the gateway's own, captured with ``caplog`` (the gateway runs in this
process, on the servers' loop thread). No test sleeps: every wait is on an answer or a closed socket.
"""

from __future__ import annotations

import logging
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import MODEL, MakeGateway

ADMIN_KEY = "sk-admin-security"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
CLIENT = {"Authorization": f"Bearer {CLIENT_KEY}"}
HELLO = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}


def admin_gateway(make_gateway: MakeGateway, providers: dict[str, list[str]], **kwargs: Any) -> GatewayServer:
    extra = kwargs.pop("extra", {})
    auth = {"admin_keys": [ADMIN_KEY], **extra.pop("auth", {})}
    return make_gateway(providers, extra={"auth": auth, **extra}, **kwargs)


# ── raw HTTP over a socket ─────────────────────────────────────────────────────────────────────────


class RawResponse:
    """One HTTP/1.1 answer as bytes: the status, the header lines exactly as sent, and the body."""

    def __init__(self, head: bytes, body: bytes) -> None:
        self.head = head
        lines = head.split(b"\r\n")
        self.status = int(lines[0].split(b" ")[1])
        self.header_lines = lines[1:]
        self.headers: dict[str, str] = {}
        for line in self.header_lines:
            name, _, value = line.partition(b":")
            self.headers[name.decode("latin-1").lower()] = value.strip().decode("latin-1")
        self.body = body


def raw_request(port: int, data: bytes, *, timeout: float = 5.0) -> RawResponse:
    """Send ``data`` as is and read one answer. The write side stays open (a body announced but never
    sent stays unsent), so an answer that waits for the body fails here with a timeout, not a hang."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            piece = sock.recv(65536)
            if not piece:
                raise AssertionError(f"connection closed before an answer: {buf!r}")
            buf += piece
        head, _, body = buf.partition(b"\r\n\r\n")
        response = RawResponse(head, b"")
        length = int(response.headers.get("content-length", "0"))
        while len(body) < length:
            piece = sock.recv(65536)
            if not piece:
                break
            body += piece
        response.body = body
        return response


def assert_clean_head(resp: RawResponse) -> None:
    """No header a client smuggled in: every line is ``Token: value`` with no CR or LF inside, and no
    header is named like the injection attempts below."""
    token = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
    for line in resp.header_lines:
        name, sep, value = line.partition(b":")
        assert sep and token.match(name), line
        assert b"\r" not in value and b"\n" not in value, line
    assert not {"injected", "x-injected", "set-cookie"} & set(resp.headers), resp.head


# ── every admin route wants an admin key ───────────────────────────────────────────────────────────


def _admin_routes(gw: GatewayServer) -> list[tuple[str, str]]:
    """(method, concrete path) for every route the app's router has under /admin — HEAD included."""
    out = []
    for route in gw.runner.app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        template = str(info.get("formatter", info.get("path", "")))
        if template == "/admin" or template.startswith("/admin/"):
            out.append((route.method, re.sub(r"\{[^}]+\}", "x", template)))
    return sorted(set(out))


def test_every_admin_route_refuses_without_the_admin_key(make_gateway: MakeGateway) -> None:
    gw = admin_gateway(make_gateway, {unique("alpha"): [MODEL]})
    routes = _admin_routes(gw)
    assert len(routes) >= 20 and ("GET", "/admin/providers") in routes and ("POST", "/admin/providers") in routes
    attempts = ({}, {"Authorization": "Bearer wrong"}, {"x-api-key": ADMIN_KEY[:-1]}, CLIENT)
    with httpx.Client(base_url=gw.base_url) as client:
        for method, path in [*routes, ("GET", "/admin/no-such-route"), ("DELETE", "/admin")]:
            for headers in attempts:
                resp = client.request(method, path, headers=headers, json={})
                assert resp.status_code == 401, (method, path, headers)
                if method != "HEAD":
                    assert resp.json()["error"]["code"] == "invalid_admin_key"


def test_with_no_admin_keys_every_admin_route_is_a_404(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    with httpx.Client(base_url=gw.base_url) as client:
        for method, path in _admin_routes(gw):
            assert client.request(method, path, headers=CLIENT, json={}).status_code == 404, (method, path)


# ── body limit: a declared Content-Length over server.body_limit_mb is refused before any read ─────────


@pytest.mark.parametrize(
    ("path", "envelope"),
    [
        ("/v1/chat/completions", "openai"),
        ("/v1/messages", "anthropic"),
        (f"/v1beta/models/{MODEL}:generateContent", "gemini"),
        ("/admin/providers", "openai"),
    ],
)
def test_a_declared_oversized_body_is_413_at_once(make_gateway: MakeGateway, path: str, envelope: str) -> None:
    """Headers announcing 10^12 bytes and no body at all: the answer comes back at once (the socket's
    5 s timeout would fail the test if the gateway waited for a byte of it)."""
    gw = admin_gateway(make_gateway, {unique("alpha"): [MODEL]}, extra={"server": {"body_limit_mb": 1}})
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
        f"x-api-key: {CLIENT_KEY}\r\nContent-Type: application/json\r\nContent-Length: {10**12}\r\n\r\n"
    )
    started = time.monotonic()
    resp = raw_request(gw.port, head.encode())
    assert time.monotonic() - started < 5
    assert resp.status == 413
    assert resp.headers["x-request-id"]
    body = orjson.loads(resp.body)
    if envelope == "openai":
        assert body["error"]["code"] == "request_too_large"
    elif envelope == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    else:
        assert body["error"]["code"] == 413 and body["error"]["status"]


def test_expect_continue_over_the_limit_gets_the_413_instead_of_100(make_gateway: MakeGateway) -> None:
    """curl asks ``Expect: 100-continue`` for bodies over 1 MB: the gateway must not invite the upload."""
    gw = make_gateway({unique("alpha"): [MODEL]}, extra={"server": {"body_limit_mb": 1}})
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
        f"Expect: 100-continue\r\nContent-Length: {2 * 1024 * 1024}\r\n\r\n"
    )
    resp = raw_request(gw.port, head.encode())
    assert resp.status == 413 and resp.headers["connection"] == "close"
    assert b"request_too_large" in resp.body and resp.headers["x-request-id"]


def test_expect_continue_under_the_limit_is_invited_and_served(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    body = orjson.dumps(HELLO)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
        f"Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
        sock.sendall(head.encode())
        assert sock.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert sock.recv(64).startswith(b"HTTP/1.1 200")


def test_a_body_just_under_the_limit_is_read(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]}, extra={"server": {"body_limit_mb": 0.01}})
    filler = "x" * 5000
    body = {**HELLO, "messages": [{"role": "user", "content": filler}]}
    assert httpx.post(f"{gw.v1}/chat/completions", json=body, headers=CLIENT, timeout=20).status_code == 200


# ── X-Request-ID and header injection ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("given", "echoed"),
    [
        ("req-123", True),
        ("a" * 128, True),
        ("!~" + "Z" * 10, True),
        ("a" * 129, False),
        ("two words", False),
        ("tab\there", False),
        ("caf\u00e9", False),
    ],
)
def test_request_id_is_echoed_only_as_1_to_128_visible_ascii(
    make_gateway: MakeGateway, given: str, echoed: bool
) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    head = f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {CLIENT_KEY}\r\nX-Request-ID: {given}\r\n\r\n"
    resp = raw_request(gw.port, head.encode("utf-8"))
    assert resp.status == 200
    got = resp.headers["x-request-id"]
    if echoed:
        assert got == given
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", got), got


INJECTIONS = [
    b"X-Request-ID: ok\rInjected: yes\r\n",  # bare CR
    b"X-Request-ID: ok\nInjected: yes\r\n",  # bare LF
    b"X-Request-ID: ok\r\n Injected: yes\r\n",  # obsolete line folding
    b"X-Request-ID: ok%0d%0aInjected:%20yes\r\n",  # percent-encoded: echoed as the literal text
    b"X-Request-ID: ok\xe2\x80\xa8Injected: yes\r\n",  # U+2028 LINE SEPARATOR
    b"X-Request-ID: ok\x00Injected: yes\r\n",  # NUL
]


@pytest.mark.parametrize("line", INJECTIONS)
def test_crlf_in_a_request_header_never_reaches_a_response_header(make_gateway: MakeGateway, line: bytes) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + CLIENT_KEY.encode() + b"\r\n" + line + b"\r\n"
    resp = raw_request(gw.port, head)
    assert_clean_head(resp)
    assert resp.status in (200, 400)
    if resp.status == 400:  # refused by the HTTP parser itself, before any of the gateway's code ran
        assert "x-request-id" not in resp.headers
        return
    echoed = resp.headers["x-request-id"]
    assert echoed in ("ok%0d%0aInjected:%20yes", "ok") or re.fullmatch(r"[0-9a-f]{32}", echoed), echoed


@pytest.mark.parametrize(
    "request_bytes",
    [
        b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n'
        b'Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s',
        b"GET /v1/models%%0d%%0aX-Injected:%%20yes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n",
    ],
)
def test_crlf_in_a_model_name_or_path_never_reaches_a_response_header(
    make_gateway: MakeGateway, request_bytes: bytes
) -> None:
    """A model name (echoed in routing headers and errors) and a path carrying CR LF + a header."""
    gw = make_gateway({unique("alpha"): [MODEL]})
    body = b'{"model": "auto\\r\\nX-Injected: yes", "messages": [{"role": "user", "content": "hi"}]}'
    if b"Content-Length" in request_bytes:
        data = request_bytes % (CLIENT_KEY.encode(), len(body), body)
    else:
        data = request_bytes % CLIENT_KEY.encode()
    resp = raw_request(gw.port, data)
    assert resp.status in (400, 404)
    assert_clean_head(resp)


# ── malformed HTTP: one log line per event, never a traceback ──────────────────────────────────────


@pytest.fixture
def gateway_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


MALFORMED = {
    "not http": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
    "bad request line": b"GET /health HTTP/9.9 extra\r\nHost: x\r\n\r\n",
    "bad header name": b"GET /health HTTP/1.1\r\nHost: x\r\nBad\x01Name: v\r\n\r\n",
    "header without colon": b"GET /health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    "oversized header": b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n",
    "too many headers": b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(200)) + b"\r\n",
    "two content lengths": b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "broken chunked body": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + CLIENT_KEY.encode()
        + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ),
}


def _read_until_closed_or_answered(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        out = b""
        while b"\r\n\r\n" not in out:
            piece = sock.recv(65536)
            if not piece:
                break
            out += piece
        return out


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_http_is_one_log_line_without_traceback(
    make_gateway: MakeGateway, gateway_log: pytest.LogCaptureFixture, case: str
) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    gateway_log.clear()
    answer = _read_until_closed_or_answered(gw.port, MALFORMED[case])
    assert re.match(rb"HTTP/1\.[01] (400|413) ", answer) or answer == b"", answer[:200]
    about = [r for r in gateway_log.records if r.name in ("aiohttp.server", "freellm.server")]
    assert len(about) == 1, [r.getMessage() for r in about]
    record = about[0]
    assert record.exc_info is None and record.exc_text is None
    message = record.getMessage()
    assert "\n" not in message and "\r" not in message and "Traceback" not in message
    assert "malformed HTTP request from 127.0.0.1" in message
    assert len(message) < 400
    assert "Traceback" not in gateway_log.text


def test_many_malformed_requests_log_one_line_each(
    make_gateway: MakeGateway, gateway_log: pytest.LogCaptureFixture
) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    gateway_log.clear()
    for _ in range(20):
        _read_until_closed_or_answered(gw.port, MALFORMED["bad header name"])
    lines = gateway_log.text.splitlines()
    assert len([line for line in lines if "malformed HTTP" in line]) == 20
    assert len(lines) == 20, lines[:5]


# ── provider keys never in logs, records or answers ────────────────────────────────────────────────


def _canary(tag: str) -> str:
    """A key no redaction pattern knows the shape of (dots, short runs): only the literal secret rule
    can keep it out of text — the strictest version of the test."""
    return f"canary.{tag}.{uuid.uuid4().hex[:8]}.{uuid.uuid4().hex[:8]}"


def test_provider_keys_never_reach_logs_records_or_answers(
    servers_loop: BackgroundLoop,
    sim: SimServer,
    sim_control: SimControl,
    tmp_path: Path,
    gateway_log: pytest.LogCaptureFixture,
) -> None:
    p401, p429, p500, good = unique("k401"), unique("k429"), unique("k500"), unique("kgood")
    keys = {name: [_canary(name.split("-")[0])] for name in (p401, p429, p500, good)}
    runtime_key = _canary("runtime")
    secrets = [k for ks in keys.values() for k in ks] + [runtime_key]
    settings = gateway_settings(
        tmp_path / "data",
        sim.base_url,
        {p401: [MODEL], p429: [MODEL], p500: [MODEL], good: [MODEL]},
        keys=keys,
        extra={"auth": {"admin_keys": [ADMIN_KEY]}, "fallback": {"expose_detail_header": True}},
    )
    gw = start_gateway(servers_loop, settings)
    seen: list[bytes] = []

    def record(resp: httpx.Response) -> httpx.Response:
        seen.append(resp.content)
        seen.extend(f"{k}: {v}".encode() for k, v in resp.headers.multi_items())
        return resp

    def echo(name: str) -> str:
        key = keys[name][0]
        return f"Incorrect API key provided: {key}. Authorization: Bearer {key} (x-api-key={key})"

    try:
        for stream in (False, True):
            sim_control.script(p401, {"status": 401, "error_message": echo(p401)})
            sim_control.script(p429, {"status": 429, "error_message": echo(p429), "retry_after": "1"})
            sim_control.script(p500, {"status": 500, "error_body": {"detail": echo(p500), "key": keys[p500][0]}})
            resp = record(httpx.post(f"{gw.v1}/chat/completions", json={**HELLO, "stream": stream}, headers=CLIENT, timeout=30))
            assert resp.status_code == 200, resp.text
            if not stream:  # the second time the failed routes are cooling down: skipped, not retried
                assert resp.headers.get("x-fallback-attempts") == "3", resp.headers
        assert sim_control.requests(p401), "the traffic reached the failing upstreams"
        # Every route failing: the exhaustion answer carries the last upstream message.
        for name in (p401, p429, p500, good):
            sim_control.script(name, {"status": 500, "error_message": echo(name)}, times=None)
        record(httpx.post(f"{gw.v1}/chat/completions", json=HELLO, headers=CLIENT, timeout=30))
        # A committed stream whose upstream then sends an in-band error quoting the key.
        sim_control.reset()
        sim_control.script(good, {"inband_error": echo(good), "inband_error_after": 1})
        pinned = {**HELLO, "model": f"{good}/{MODEL}", "stream": True}
        record(httpx.post(f"{gw.v1}/chat/completions", json=pinned, headers=CLIENT, timeout=30))
        # The admin API: a key added at run time, tested against an upstream that echoes it, every listing.
        added = record(httpx.post(f"{gw.base_url}/admin/providers/{good}/keys", json={"key": runtime_key}, headers=ADMIN))
        assert added.status_code == 201, added.text
        sim_control.script(good, {"status": 401, "error_message": f"bad key {runtime_key}"}, endpoint="models")
        record(httpx.post(f"{gw.base_url}/admin/providers/{good}/keys/{added.json()['id']}/test", headers=ADMIN))
        for method, path in _admin_routes(gw):
            if method == "GET" and "/x" not in path:
                record(httpx.get(f"{gw.base_url}{path}", headers=ADMIN, timeout=30))
        record(httpx.get(f"{gw.base_url}/metrics"))
        record(httpx.get(f"{gw.v1}/models", headers=CLIENT))
        record(httpx.get(f"{gw.base_url}/admin/requests", params={"limit": 100}, headers=ADMIN))
    finally:
        gw.close()  # flush every buffered record to disk before the files are read

    written = [(path, path.read_bytes()) for path in (tmp_path / "data").rglob("*") if path.is_file()]
    assert any(path.suffix in (".db", ".sqlite", ".sqlite3") or "db" in path.name for path, _ in written), written
    assert any(p401.encode() in content for _, content in written), "the failed hops were recorded"
    # The gateway's own log (the simulator, being the upstream, may log the keys it was sent).
    mine = [r for r in gateway_log.records if not r.name.startswith("freellm.sim")]
    logs = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in mine)
    for secret in secrets:
        raw = secret.encode()
        for path, content in written:
            assert raw not in content, (secret, path)
        assert secret not in logs, secret
        for blob in seen:
            assert raw not in blob, (secret, blob[:300])


# ── SSRF: provider base URLs added at run time ─────────────────────────────────────────────────────

REFUSED_BASE_URLS = [
    "http://169.254.169.254/v1",
    "http://169.254.170.2/v1",
    "http://[fe80::1]:8080/v1",
    "http://[fd00:ec2::254]/v1",
    "http://[::ffff:169.254.169.254]/v1",
    "http://metadata.google.internal/v1",
    "http://Metadata.Google.Internal./v1",
    "http://2852039166/v1",
]


@pytest.mark.parametrize("base_url", REFUSED_BASE_URLS)
def test_run_time_provider_urls_to_link_local_or_metadata_are_400(make_gateway: MakeGateway, base_url: str) -> None:
    a = unique("alpha")
    gw = admin_gateway(make_gateway, {a: [MODEL]})
    body = {"name": unique("evil"), "kind": "openai", "base_url": base_url, "models": [{"id": MODEL}]}
    resp = httpx.post(f"{gw.base_url}/admin/providers", json=body, headers=ADMIN)
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["param"] == "base_url" and err["code"] == "upstream_not_allowed"
    assert "base_url" in err["message"] and "security.allow_private_upstreams" in err["message"]
    listed = httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"]
    assert [p["name"] for p in listed] == [a]


def test_run_time_providers_on_loopback_and_lan_are_accepted_and_served(
    make_gateway: MakeGateway, sim: SimServer, sim_control: SimControl
) -> None:
    """Local model servers (127.0.0.1, 10.x) are what self-hosters add; the loopback one then answers
    through the guarded connection pool."""
    a, local = unique("alpha"), unique("local")
    gw = admin_gateway(make_gateway, {a: [MODEL]})
    lan = {"name": unique("lan"), "kind": "openai", "base_url": "http://10.0.0.5:11434/v1", "models": [{"id": MODEL}]}
    assert httpx.post(f"{gw.base_url}/admin/providers", json=lan, headers=ADMIN).status_code == 201
    mine = {
        "name": local,
        "kind": "openai",
        "base_url": f"{sim.base_url}/{local}/v1",
        "models": [{"id": MODEL}],
        "keys": [f"{local}-key"],
    }
    assert httpx.post(f"{gw.base_url}/admin/providers", json=mine, headers=ADMIN).status_code == 201
    resp = httpx.post(f"{gw.v1}/chat/completions", json={**HELLO, "model": f"{local}/{MODEL}"}, headers=CLIENT, timeout=20)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-routed-via"] == f"{local}/{MODEL}"


def test_allow_private_upstreams_lifts_the_guard(make_gateway: MakeGateway) -> None:
    gw = admin_gateway(make_gateway, {unique("alpha"): [MODEL]}, extra={"security": {"allow_private_upstreams": True}})
    body = {"name": unique("meta"), "kind": "openai", "base_url": "http://169.254.169.254/v1", "models": [{"id": MODEL}]}
    assert httpx.post(f"{gw.base_url}/admin/providers", json=body, headers=ADMIN).status_code == 201


def test_config_file_providers_are_trusted(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> None:
    a = unique("alpha")
    settings = gateway_settings(tmp_path / "d", sim.base_url, {a: [MODEL]}, extra={"auth": {"admin_keys": [ADMIN_KEY]}})
    settings.providers[0].base_url = "http://169.254.169.254/v1"
    gw = start_gateway(servers_loop, settings)
    try:
        listed = httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"]
        assert listed[0]["base_url"] == "http://169.254.169.254/v1"
    finally:
        gw.close()


# ── failed authentications per IP ──────────────────────────────────────────────────────────────────


def _minute(now: float) -> int:
    return int(now // 60)


def test_failed_auth_limit_is_429_per_surface_and_never_throttles_valid_keys(
    make_gateway: MakeGateway, gateway_log: pytest.LogCaptureFixture
) -> None:
    """Three bad keys are 401s; from the fourth in the window, bad keys get 429 with Retry-After in the
    surface's own envelope — while the valid client and admin keys from the same address keep working,
    and the log says it once. (Run again if the clock's minute turns mid-test: the windows are fixed.)"""
    for _attempt in range(2):
        gw = admin_gateway(make_gateway, {unique("alpha"): [MODEL]}, extra={"server": {"auth_failure_limit_per_min": 3}})
        gateway_log.clear()
        started = time.time()
        bad = {"Authorization": "Bearer sk-wrong"}
        first = [httpx.post(f"{gw.v1}/chat/completions", json=HELLO, headers=bad).status_code for _ in range(3)]
        over = httpx.post(f"{gw.v1}/chat/completions", json=HELLO, headers=bad)
        anthropic = httpx.post(f"{gw.v1}/messages", json={"model": "auto", "max_tokens": 5, "messages": []},
                               headers={"x-api-key": "sk-wrong", "anthropic-version": "2023-06-01"})
        gemini = httpx.post(f"{gw.base_url}/v1beta/models/{MODEL}:generateContent", json={}, headers={"x-goog-api-key": "nope"})
        admin = httpx.get(f"{gw.base_url}/admin/providers", headers=bad)
        valid = httpx.post(f"{gw.v1}/chat/completions", json=HELLO, headers=CLIENT, timeout=20)
        valid_admin = httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN)
        more = [httpx.get(f"{gw.v1}/models", headers=bad).status_code for _ in range(10)]
        if _minute(started) != _minute(time.time()):
            continue
        assert first == [401, 401, 401]
        assert over.status_code == 429 and 1 <= int(over.headers["Retry-After"]) <= 60
        assert over.json()["error"]["code"] == "too_many_auth_failures"
        assert over.json()["error"]["type"] == "rate_limit_error"
        assert anthropic.status_code == 429 and anthropic.json()["type"] == "error"
        assert anthropic.json()["error"]["type"] == "rate_limit_error" and anthropic.headers["Retry-After"]
        assert gemini.status_code == 429 and gemini.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
        assert admin.status_code == 429
        assert valid.status_code == 200, valid.text
        assert valid_admin.status_code == 200
        assert more == [429] * 10
        said = [r for r in gateway_log.records if "failed authentications from" in r.getMessage()]
        assert len(said) == 1 and "127.0.0.1" in said[0].getMessage()
        return
    pytest.fail("the minute turned during both runs")


def test_failed_auth_limit_is_separate_from_the_request_limiter(make_gateway: MakeGateway) -> None:
    """``ip_rate_limit_rpm`` off, the failed-auth limiter on: authenticated traffic is unlimited, and a
    valid key's requests do not count towards the failures."""
    gw = make_gateway({unique("alpha"): [MODEL]}, extra={"server": {"auth_failure_limit_per_min": 2}})
    oks = [httpx.get(f"{gw.v1}/models", headers=CLIENT).status_code for _ in range(10)]
    assert oks == [200] * 10
    started = time.time()
    statuses = [httpx.get(f"{gw.v1}/models", headers={"Authorization": "Bearer no"}).status_code for _ in range(3)]
    if _minute(started) == _minute(time.time()):
        assert statuses == [401, 401, 429]
    assert "x-ratelimit-limit" not in httpx.get(f"{gw.v1}/models", headers=CLIENT).headers
