"""Over the wire: configuration written by another process sharing the data directory — another
gateway's admin API here, ``freellm keys --config`` in test_cli_keys — is served within 5 s, no restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx

from freellm.admin.watch import WATCH_INTERVAL_S
from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import MODEL, upstream

ADMIN_KEY = "sk-admin-watch"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
PICK_UP_S = 5.0
"""What docs/cli.md promises."""


def chat_status(gw: GatewayServer) -> tuple[int, str | None]:
    resp = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {CLIENT_KEY}"},
    )
    return resp.status_code, resp.headers.get("x-routed-via")


def within_pick_up(check: Callable[[], bool]) -> float:
    """Seconds until ``check()`` held, polling no faster than the watcher runs; fails past the promise."""
    start = time.monotonic()
    while not check():
        elapsed = time.monotonic() - start
        assert elapsed < PICK_UP_S, "not picked up within 5 s"
        time.sleep(WATCH_INTERVAL_S / 4)  # a polling step bounded by the deadline above, not a wait for an event
    return time.monotonic() - start


def test_a_change_made_through_one_gateway_is_served_by_another_on_the_same_data_dir(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path
) -> None:
    a, b = unique("alpha"), unique("beta")
    settings = gateway_settings(
        tmp_path / "data",
        sim.base_url,
        {a: [MODEL], b: [MODEL]},
        keys={a: [], b: [f"{b}-key-1"]},
        extra={"auth": {"admin_keys": [ADMIN_KEY]}},
    )
    writer = start_gateway(servers_loop, settings)
    reader = start_gateway(servers_loop, settings)
    try:
        assert chat_status(reader) == (200, f"{b}/{MODEL}")  # alpha has no key yet: beta answers
        added = httpx.post(f"{writer.base_url}/admin/providers/{a}/keys", json={"key": "sk-shared-WxYz"}, headers=ADMIN)
        assert added.status_code == 201
        within_pick_up(lambda: chat_status(reader) == (200, f"{a}/{MODEL}"))
        listed = httpx.get(f"{reader.base_url}/admin/providers", headers=ADMIN).json()["data"]
        [key] = next(p for p in listed if p["name"] == a)["keys"]
        assert key["masked"] == "…WxYz" and key["source"] == "runtime"

        key_id = added.json()["id"]
        off = httpx.patch(f"{writer.base_url}/admin/providers/{a}/keys/{key_id}", json={"enabled": False}, headers=ADMIN)
        assert off.status_code == 200
        within_pick_up(lambda: chat_status(reader) == (200, f"{b}/{MODEL}"))

        chain = httpx.put(f"{writer.base_url}/admin/chain", json={"chain": [f"{b}/{MODEL}"]}, headers=ADMIN)
        assert chain.status_code == 200
        within_pick_up(lambda: httpx.get(f"{reader.base_url}/admin/chain", headers=ADMIN).json()["chain"] == [f"{b}/{MODEL}"])
    finally:
        reader.close()
        writer.close()


def test_the_reader_keeps_its_own_unsaved_change(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> None:
    """A gateway's own admin change is never rolled back by its watcher re-reading the file."""
    a, b = unique("alpha"), unique("beta")
    settings = gateway_settings(
        tmp_path / "data", sim.base_url, {a: [MODEL], b: [MODEL]}, extra={"auth": {"admin_keys": [ADMIN_KEY]}}
    )
    gw = start_gateway(servers_loop, settings)
    try:
        for order in ([b, a], [a, b], [b, a]):
            chain = [f"{name}/{MODEL}" for name in order]
            assert httpx.put(f"{gw.base_url}/admin/chain", json={"chain": chain}, headers=ADMIN).status_code == 200
            assert chat_status(gw) == (200, chain[0])
        assert gw.run(gw.state.store.refresh_settings(["admin_overlay", "provider_keys"])) == {}
        assert chat_status(gw) == (200, f"{b}/{MODEL}")
    finally:
        gw.close()


def test_key_health_learned_by_one_gateway_is_known_to_another(
    servers_loop: BackgroundLoop, sim: SimServer, sim_control: SimControl, tmp_path: Path
) -> None:
    a, b = unique("alpha"), unique("beta")
    settings = gateway_settings(
        tmp_path / "data", sim.base_url, {a: [MODEL], b: [MODEL]}, extra={"auth": {"admin_keys": [ADMIN_KEY]}}
    )
    writer = start_gateway(servers_loop, settings)
    reader = start_gateway(servers_loop, settings)
    try:
        [key] = next(p for p in httpx.get(f"{writer.base_url}/admin/providers", headers=ADMIN).json()["data"] if p["name"] == a)["keys"]
        sim_control.script(a, {"status": 401}, endpoint="models")
        tested = httpx.post(f"{writer.base_url}/admin/providers/{a}/keys/{key['id']}/test", headers=ADMIN).json()
        assert tested["status"] == "invalid"

        def reader_knows() -> bool:
            listed = httpx.get(f"{reader.base_url}/admin/providers", headers=ADMIN).json()["data"]
            return next(p for p in listed if p["name"] == a)["keys"][0]["status"] == "invalid"

        within_pick_up(reader_knows)
        assert chat_status(reader) == (200, f"{b}/{MODEL}")  # the invalid key is skipped there too
        assert upstream(sim_control, a) == []
    finally:
        reader.close()
        writer.close()
