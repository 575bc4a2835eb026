"""Over the wire: replicas sharing their durable records in PostgreSQL (``storage.postgres_url``).

Each test has its own namespace (schema ``t_<uuid hex>``, dropped afterwards) on the development and CI
machines' PostgreSQL (127.0.0.1:5432, database ``test``), and runs several gateways — each with its own
data directory, so nothing is shared through SQLite — that share it. They share the master key through
``FREELLM_MASTER_KEY``, as a fleet must for the encrypted provider keys. Outages go through the unit
tests' :class:`TcpProxy`, run on the servers' loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx2 as httpx
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import AUTH, MODEL, sdk, upstream
from tests.unit.test_postgres_store import PG_URL, TcpProxy

ADMIN_KEY = "sk-admin-pg"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
FREELLM = str(Path(sys.executable).with_name("freellm"))


def poll(check: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Until ``check()`` holds (a deadline, not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(0.05)


@pytest.fixture
def namespace(servers_loop: BackgroundLoop) -> Iterator[str]:
    ns = f"t_{uuid.uuid4().hex}"
    yield ns

    async def drop() -> None:
        conn = await asyncpg.connect(PG_URL)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{ns}" CASCADE')
        finally:
            await conn.close()

    servers_loop.run(drop())


@pytest.fixture
def master_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = os.urandom(32).hex()
    monkeypatch.setenv("FREELLM_MASTER_KEY", key)
    return key


class Fleet:
    """Replicas on one namespace and one provider, each started on a fresh data directory."""

    def __init__(self, bg: BackgroundLoop, sim: SimServer, tmp_path: Path, namespace: str) -> None:
        self.bg, self.sim, self.tmp_path, self.namespace = bg, sim, tmp_path, namespace
        self.provider = unique("alpha")
        self.started: list[GatewayServer] = []

    def start(self, url: str = PG_URL) -> GatewayServer:
        data_dir = self.tmp_path / f"replica{len(self.started)}"
        settings = gateway_settings(
            data_dir,
            self.sim.base_url,
            {self.provider: [MODEL]},
            extra={
                "storage": {"postgres_url": url, "namespace": self.namespace},
                "auth": {"admin_keys": [ADMIN_KEY]},
            },
        )
        gw = start_gateway(self.bg, settings)
        self.started.append(gw)
        return gw

    def close(self) -> None:
        for gw in self.started:
            gw.close()


@pytest.fixture
def fleet(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path, namespace: str, master_key: str
) -> Iterator[Fleet]:
    f = Fleet(servers_loop, sim, tmp_path, namespace)
    yield f
    f.close()


@pytest.fixture
def proxy(servers_loop: BackgroundLoop) -> Iterator[TcpProxy]:
    p = TcpProxy()
    servers_loop.run(p.start())
    yield p
    servers_loop.run(p.close())


def chat(gw: GatewayServer, request_id: str) -> httpx.Response:
    body = {"model": "auto", "messages": [{"role": "user", "content": "Hello"}]}
    return httpx.post(
        f"{gw.v1}/chat/completions", json=body, headers={**AUTH, "X-Request-ID": request_id}, timeout=20
    )


def logged_ids(gw: GatewayServer) -> set[str]:
    resp = httpx.get(f"{gw.base_url}/admin/requests?limit=1000", headers=ADMIN, timeout=20)
    assert resp.status_code == 200, resp.text
    return {row["id"] for row in resp.json()["data"]}


def health(gw: GatewayServer) -> dict[str, Any]:
    resp = httpx.get(f"{gw.base_url}/health", timeout=20)
    assert resp.status_code == 200
    body: dict[str, Any] = resp.json()
    return body


# -- shared records ----------------------------------------------------------------------------------------


def test_a_responses_chain_crosses_replicas_and_survives_restarting_them_all(
    fleet: Fleet, sim_control: SimControl
) -> None:
    one, two = fleet.start(), fleet.start()
    a = fleet.provider
    sim_control.script(a, {"text": "Your name is Ada."})
    first = sdk(one).responses.create(model="auto", input="My name is Ada. What is my name?")
    sim_control.script(a, {"text": "You told me: Ada."})
    second = sdk(two).responses.create(model="auto", input="And again?", previous_response_id=first.id)
    assert second.output_text == "You told me: Ada."
    _, turn2 = upstream(sim_control, a)
    assert [m["content"] for m in turn2["body"]["messages"]] == [
        "My name is Ada. What is my name?",
        "Your name is Ada.",
        "And again?",
    ]
    fetched = sdk(two).responses.retrieve(first.id)
    assert fetched.id == first.id and fetched.output_text == "Your name is Ada."

    fleet.close()  # every replica gone, every data directory left behind
    three, four = fleet.start(), fleet.start()
    assert sdk(three).responses.retrieve(second.id).output_text == "You told me: Ada."
    sim_control.script(a, {"text": "Still Ada."})
    third = sdk(four).responses.create(model="auto", input="Once more.", previous_response_id=second.id)
    assert third.output_text == "Still Ada."
    assert [m["content"] for m in upstream(sim_control, a)[2]["body"]["messages"]] == [
        "My name is Ada. What is my name?",
        "Your name is Ada.",
        "And again?",
        "You told me: Ada.",
        "Once more.",
    ]
    deleted = httpx.delete(f"{three.v1}/responses/{first.id}", headers=AUTH, timeout=20)
    assert deleted.status_code == 200
    assert httpx.get(f"{four.v1}/responses/{first.id}", headers=AUTH, timeout=20).status_code == 404


def test_every_replicas_request_log_shows_on_any(fleet: Fleet) -> None:
    replicas = [fleet.start() for _ in range(3)]
    ids = {f"req-{uuid.uuid4().hex[:8]}-{i}": gw for i, gw in enumerate(replicas)}
    for request_id, gw in ids.items():
        assert chat(gw, request_id).status_code == 200
    for gw in replicas:
        poll(lambda gw=gw: set(ids) <= logged_ids(gw))  # the others' rows once their flush ran (0.5 s)


def test_a_provider_key_added_on_one_replica_serves_on_the_other(fleet: Fleet, sim_control: SimControl) -> None:
    one, two = fleet.start(), fleet.start()
    secret = "sk-live-" + uuid.uuid4().hex + "AbCd"
    added = httpx.post(
        f"{one.base_url}/admin/providers/{fleet.provider}/keys", json={"key": secret}, headers=ADMIN, timeout=20
    )
    assert added.status_code == 201, added.text
    key_id = added.json()["id"]

    def listed_on_two() -> bool:
        listing = httpx.get(f"{two.base_url}/admin/providers", headers=ADMIN, timeout=20).json()["data"]
        keys = next(p for p in listing if p["name"] == fleet.provider)["keys"]
        return any(k["id"] == key_id for k in keys)

    poll(listed_on_two)  # the settings watcher re-reads PostgreSQL every second


# -- faults ------------------------------------------------------------------------------------------------


def test_postgres_unreachable_degrades_records_not_requests(
    fleet: Fleet, proxy: TcpProxy, servers_loop: BackgroundLoop, sim_control: SimControl
) -> None:
    one, two = fleet.start(proxy.url), fleet.start()
    held = sdk(two).responses.create(model="auto", input="Remember me.")  # only PostgreSQL (and two) hold it
    assert health(one) == {"status": "ok"}

    servers_loop.run(proxy.cut())
    during = f"req-during-{uuid.uuid4().hex[:8]}"
    assert chat(one, during).status_code == 200  # requests still succeed
    poll(lambda: health(one) == {"status": "degraded", "records": "buffering"})
    assert health(two) == {"status": "ok"}

    chained = httpx.post(
        f"{one.v1}/responses",
        json={"model": "auto", "input": "And now?", "previous_response_id": held.id},
        headers=AUTH,
        timeout=20,
    )
    assert chained.status_code == 503, chained.text
    err = chained.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["code"] == "records_unavailable"
    fetched = httpx.get(f"{one.v1}/responses/{held.id}", headers=AUTH, timeout=20)
    assert fetched.status_code == 503 and fetched.json()["error"]["code"] == "records_unavailable"
    listing = httpx.get(f"{one.base_url}/admin/requests", headers=ADMIN, timeout=20)
    assert listing.status_code == 503 and listing.json()["error"]["code"] == "records_unavailable"

    servers_loop.run(proxy.restore())
    poll(lambda: health(one) == {"status": "ok"})
    poll(lambda: during in logged_ids(two))  # the buffered row was written once PostgreSQL answered
    again = sdk(one).responses.create(model="auto", input="And now?", previous_response_id=held.id)
    assert again.previous_response_id == held.id


# -- the db commands and start-up errors, as an operator runs them ----------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FREELLM, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def test_db_upgrade_and_import(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path, namespace: str, master_key: str, fleet: Fleet
) -> None:
    # A single gateway on its SQLite data directory: a request, a stored response, a provider key.
    source = tmp_path / "single"
    settings = gateway_settings(
        source, sim.base_url, {fleet.provider: [MODEL]}, extra={"auth": {"admin_keys": [ADMIN_KEY]}}
    )
    single = start_gateway(servers_loop, settings)
    assert chat(single, "req-before-import").status_code == 200
    stored = sdk(single).responses.create(model="auto", input="Kept across the move.")
    secret = "sk-moved-" + uuid.uuid4().hex
    added = httpx.post(
        f"{single.base_url}/admin/providers/{fleet.provider}/keys", json={"key": secret}, headers=ADMIN, timeout=20
    )
    assert added.status_code == 201
    single.close()

    config = tmp_path / "fleet.yaml"
    config.write_text(
        f"storage:\n  path: {tmp_path / 'cli-data'}\n  postgres_url: {PG_URL}\n  namespace: {namespace}\n"
    )
    up = run_cli("db", "upgrade", "--config", str(config))
    assert up.returncode == 0, up.stderr
    assert f'schema "{namespace}"' in up.stdout and "version 1 (was empty)" in up.stdout
    again = run_cli("db", "upgrade", "--config", str(config))
    assert again.returncode == 0 and "version 1 (up to date)" in again.stdout

    imported = run_cli("db", "import", "--from", str(source), "--config", str(config))
    assert imported.returncode == 0, imported.stderr
    assert "1 stored responses" in imported.stdout and "request-log rows" in imported.stdout
    twice = run_cli("db", "import", "--from", str(source), "--config", str(config))
    assert twice.returncode == 1 and "already imported" in twice.stderr and "Traceback" not in twice.stderr

    replica = fleet.start()  # a fresh data directory: everything comes from PostgreSQL
    assert "req-before-import" in logged_ids(replica)
    assert sdk(replica).responses.retrieve(stored.id).id == stored.id
    listing = httpx.get(f"{replica.base_url}/admin/providers", headers=ADMIN, timeout=20).json()["data"]
    keys = next(p for p in listing if p["name"] == fleet.provider)["keys"]
    assert added.json()["id"] in {k["id"] for k in keys}  # still encrypted, opened by the shared master key


def test_serve_refuses_a_bad_database_or_login_with_a_clear_message(tmp_path: Path, namespace: str) -> None:
    for url, cause in (
        ("postgresql://postgres:pw-s3cret@127.0.0.1:5432/no_such_database_here", "unknown database"),
        ("postgresql://no_such_role:pw-s3cret@127.0.0.1:5432/test", "refused the login"),
    ):
        config = tmp_path / "bad.yaml"
        config.write_text(f"storage:\n  path: {tmp_path / 'data'}\n  postgres_url: {url}\n  namespace: {namespace}\n")
        served = run_cli("serve", "--config", str(config), "--port", "0", env={"FREELLM_API_KEY": CLIENT_KEY})
        assert served.returncode != 0
        assert cause in served.stderr and "storage.postgres_url" in served.stderr
        assert "Traceback" not in served.stderr and "pw-s3cret" not in served.stderr + served.stdout
        upgraded = run_cli("db", "upgrade", "--config", str(config))
        assert upgraded.returncode != 0 and cause in upgraded.stderr and "pw-s3cret" not in upgraded.stderr
