"""Three gateways, one Redis: what one replica decides, every replica honours at once.

Each gateway has its own data directory (nothing is shared through SQLite) and ``storage.redis_url`` on
the local Redis with a namespace of the test's own, deleted afterwards. The simulator's request log says
what reached each upstream key.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim.control import SimControl
from freellm.store.base import key_scope
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, free_port, unique
from tests.integration.helpers import MODEL, MakeGateway, sdk, upstream
from tests.unit.test_redis_store import REDIS_URL, RedisProxy, delete_namespace

FREELLM = str(Path(sys.executable).parent / "freellm")

Replicas = Callable[..., list[GatewayServer]]


@pytest.fixture
def namespace(servers_loop: BackgroundLoop) -> Iterator[str]:
    ns = f"t_{uuid.uuid4().hex}"
    yield ns
    servers_loop.run(delete_namespace(ns))


@pytest.fixture
def replicas(make_gateway: MakeGateway, namespace: str) -> Replicas:
    """``replicas(n, providers, url=…, **settings)`` → n gateways sharing hot state in Redis."""

    def start(
        n: int, providers: dict[str, list[str]], *, url: str = REDIS_URL, **kwargs: Any
    ) -> list[GatewayServer]:
        extra: dict[str, Any] = kwargs.pop("extra", {})
        storage = {"redis_url": url, "namespace": namespace, **extra.pop("storage", {})}
        return [make_gateway(providers, extra={**extra, "storage": storage}, **kwargs) for _ in range(n)]

    return start


def ask(gw: GatewayServer, content: str = "hi", **headers: str) -> str:
    """One non-stream request; the route that answered."""
    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": content}], extra_headers=headers or None
    )
    return str(raw.headers["x-routed-via"])


def health(gw: GatewayServer) -> dict[str, Any]:
    response = httpx.get(f"{gw.base_url}/health", timeout=10)
    assert response.status_code == 200
    doc: dict[str, Any] = response.json()
    return doc


def wait_for(check: Callable[[], bool], deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < end, "condition not reached before the deadline"
        time.sleep(0.05)


def limited(replicas: Replicas) -> tuple[list[GatewayServer], str, str]:
    """Three replicas; route A's key allows 4 requests a minute, route B is unlimited."""
    a, b = unique("alpha"), unique("beta")
    gws = replicas(3, {a: [MODEL], b: [MODEL]}, model_options={f"{a}/{MODEL}": {"limits": {"rpm": 4}}})
    for gw in gws:
        assert health(gw) == {"status": "ok"}
    return gws, a, b


def test_rpm_holds_for_the_fleet_sequential(replicas: Replicas, sim_control: SimControl) -> None:
    gws, a, b = limited(replicas)
    served = [ask(gws[i % 3]) for i in range(12)]
    assert served == [f"{a}/{MODEL}"] * 4 + [f"{b}/{MODEL}"] * 8
    assert len(upstream(sim_control, a)) == 4
    assert len(upstream(sim_control, b)) == 8


def test_rpm_holds_for_the_fleet_concurrent(replicas: Replicas, sim_control: SimControl) -> None:
    """Twelve requests at once over three replicas: the four that win A's slots hold them (A answers
    slowly) while the other eight are routed, so each of those saw A full — however their check-and-lease
    calls interleaved in Redis."""
    gws, a, b = limited(replicas)
    sim_control.set_default({"first_byte_delay_ms": 1500}, provider=a)
    try:
        with ThreadPoolExecutor(12) as pool:
            served = list(pool.map(lambda i: ask(gws[i % 3], f"hi {i}"), range(12)))
    finally:
        sim_control.set_default(None, provider=a)
    assert served.count(f"{a}/{MODEL}") == 4
    assert len(upstream(sim_control, a)) == 4
    assert len(upstream(sim_control, b)) == 8
    for gw in gws:  # every lease was released (on whichever replica took it)
        assert gw.run(gw.state.store.lease_count()) == 0
        assert health(gw) == {"status": "ok"}


def test_64_streams_over_two_replicas_with_a_failing_provider_all_complete(
    replicas: Replicas, sim_control: SimControl
) -> None:
    """The failing provider is tried first; every stream fails over before its first token and
    completes on the healthy one, and no lease is left in Redis afterwards."""
    a, b = unique("alpha"), unique("beta")
    gws = replicas(2, {a: [MODEL], b: [MODEL]}, extra={"fallback": {"cooldown_local_s": 0.001}})
    sim_control.set_default({"status": 500}, provider=a)

    def stream(i: int) -> tuple[str, str]:
        with httpx.stream(
            "POST",
            f"{gws[i % 2].v1}/chat/completions",
            json={"model": "auto", "stream": True, "messages": [{"role": "user", "content": f"stream {i}"}]},
            headers={"Authorization": f"Bearer {CLIENT_KEY}"},
            timeout=30,
        ) as resp:
            assert resp.status_code == 200
            body = resp.read().decode()
            return resp.headers["x-routed-via"], body

    try:
        with ThreadPoolExecutor(64) as pool:
            results = list(pool.map(stream, range(64)))
    finally:
        sim_control.set_default(None, provider=a)
    assert all(route == f"{b}/{MODEL}" for route, _ in results)
    assert all(body.rstrip().endswith("data: [DONE]") and "error" not in body for _, body in results)
    assert len(upstream(sim_control, b)) == 64
    for gw in gws:  # released everywhere (a lease whose Redis call timed out under this load included)
        wait_for(lambda gw=gw: gw.run(gw.state.store.lease_count()) == 0)


def test_a_429_on_one_replica_cools_the_key_for_the_others(
    replicas: Replicas, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    # A loopback upstream gets fallback.cooldown_local_s rather than the Retry-After: long enough here.
    gw1, gw2, gw3 = replicas(3, {a: [MODEL], b: [MODEL]}, extra={"fallback": {"cooldown_local_s": 120}})
    sim_control.script(a, {"status": 429, "headers": {"Retry-After": "120"}})
    assert ask(gw1) == f"{b}/{MODEL}"
    assert len(upstream(sim_control, a)) == 1
    [key] = gw2.state.catalog.keys[a]
    record = gw2.run(gw2.state.store.get_cooldown(key_scope(a, MODEL, key.key_id), time.time()))
    assert record is not None and record.until - time.time() > 60
    assert ask(gw2) == f"{b}/{MODEL}"
    assert ask(gw3) == f"{b}/{MODEL}"
    assert len(upstream(sim_control, a)) == 1  # neither replica 2 nor 3 tried the cooled key


def test_a_sticky_session_holds_across_replicas(replicas: Replicas, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw1, gw2 = replicas(2, {a: [MODEL], b: [MODEL]}, extra={"fallback": {"cooldown_local_s": 0}})
    sim_control.script(a, {"status": 500})  # turn 1 fails over A → B; A is healthy again right after
    sid = {"X-Session-Id": f"conv-{uuid.uuid4().hex[:8]}"}
    first = sdk(gw1).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Plan the refactor."}], extra_headers=sid
    )
    assert first.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert first.headers["x-freellm-session"] == "new"
    second = sdk(gw2).chat.completions.with_raw_response.create(
        model="auto",
        messages=[
            {"role": "user", "content": "Plan the refactor."},
            {"role": "assistant", "content": first.parse().choices[0].message.content or "ok"},
            {"role": "user", "content": "Go on."},
        ],
        extra_headers=sid,
    )
    assert second.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert second.headers["x-freellm-session"] == "sticky"
    assert len(upstream(sim_control, a)) == 1  # replica 2 never sent the second turn to A


def test_a_cached_answer_stored_by_one_replica_is_a_hit_on_another_streams_included(
    replicas: Replicas, sim_control: SimControl
) -> None:
    a = unique("alpha")
    first, second = replicas(2, {a: [MODEL]}, extra={"cache": {"enabled": True}})
    for stream in (False, True):
        payload = {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": f"cache me {stream}"}]}
        headers = {"Authorization": f"Bearer {CLIENT_KEY}"}
        stored = httpx.post(f"{first.v1}/chat/completions", json=payload, headers=headers, timeout=15)
        hit = httpx.post(f"{second.v1}/chat/completions", json=payload, headers=headers, timeout=15)
        assert stored.headers["X-FreeLLM-Cache"] == "MISS" and hit.headers["X-FreeLLM-Cache"] == "HIT", stream
        assert hit.content == stored.content  # byte for byte, the stream's frames included
    assert len(upstream(sim_control, a)) == 2  # one upstream call per request kind, for the whole fleet


def test_redis_unreachable_degrades_then_recovers(
    replicas: Replicas, servers_loop: BackgroundLoop, sim_control: SimControl
) -> None:
    proxy = servers_loop.run(RedisProxy().start())
    try:
        a = unique("alpha")
        [gw] = replicas(1, {a: [MODEL]}, url=proxy.url, extra={"storage": {"redis_timeout_ms": 100}})
        assert ask(gw) == f"{a}/{MODEL}"
        assert health(gw) == {"status": "ok"}
        servers_loop.loop.call_soon_threadsafe(proxy.pause)  # Redis goes silent
        started = time.monotonic()
        for _ in range(3):
            assert ask(gw) == f"{a}/{MODEL}"
        assert time.monotonic() - started < 5
        assert health(gw) == {"status": "degraded", "state": "local"}
        servers_loop.loop.call_soon_threadsafe(proxy.resume)
        wait_for(lambda: health(gw) == {"status": "ok"})
        assert ask(gw) == f"{a}/{MODEL}"
        assert len(upstream(sim_control, a)) == 5
    finally:
        servers_loop.run(proxy.close())


@pytest.fixture
def redis_with_a_password(tmp_path: Path) -> Iterator[int]:
    """A second, real Redis server that wants a password (the shared one has none)."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--requirepass", "right-password", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() not in (
            "PONG",
            "NOAUTH Authentication required.",
        ):
            assert time.monotonic() < deadline, "the password-protected redis-server did not start"
            time.sleep(0.05)  # polling the server's start, bounded by the deadline
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_serve_refuses_a_redis_that_refuses_it(tmp_path: Path, redis_with_a_password: int) -> None:
    """A wrong password or database number is configuration, not an outage: a one-line error naming the
    cause, no traceback, no password (a Redis that is down is an outage: test_redis_store)."""
    for url in (f"redis://:pw-s3cret@127.0.0.1:{redis_with_a_password}/0", "redis://127.0.0.1:6379/999"):
        config = tmp_path / "bad.yaml"
        config.write_text(f"storage:\n  path: {tmp_path / 'data'}\n  redis_url: '{url}'\n  namespace: t_refused\n")
        served = subprocess.run(
            [FREELLM, "serve", "--config", str(config), "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "FREELLM_API_KEY": CLIENT_KEY},
        )
        assert served.returncode == 2, served.stderr
        assert served.stderr.startswith("freellm: ") and "Redis" in served.stderr
        assert "Traceback" not in served.stderr and "pw-s3cret" not in served.stderr + served.stdout
