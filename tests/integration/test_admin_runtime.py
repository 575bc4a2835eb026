"""``GET /admin/runtime``: the process's vital signs the soak samples, behind the admin key."""

from __future__ import annotations

import httpx2 as httpx

from tests.integration.helpers import AUTH, MakeGateway, body, one_route

ADMIN_KEY = "sk-admin-runtime"


def test_runtime_reports_tasks_fds_memory_and_nothing_held_after_a_turn(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway, extra={"auth": {"admin_keys": [ADMIN_KEY]}})
    answer = httpx.post(f"{gw.v1}/chat/completions", json=body(stream=True), headers=AUTH, timeout=15)
    assert answer.status_code == 200

    resp = httpx.get(f"{gw.base_url}/admin/runtime", headers={"x-api-key": ADMIN_KEY}, timeout=15)

    assert resp.status_code == 200
    doc = resp.json()
    assert set(doc) == {
        "pid",
        "asyncio_tasks",
        "open_fds",
        "rss_bytes",
        "turns_running",
        "leases",
        "upstream_connections",
    }
    assert doc["asyncio_tasks"] >= 1  # at least the handler answering this call
    assert doc["open_fds"] > 0 and doc["rss_bytes"] > 1024 * 1024
    assert doc["turns_running"] == 0 and doc["leases"] == 0
    # The turn's upstream connection went back to the pool, kept alive for the next one.
    assert doc["upstream_connections"] == {"checked_out": 0, "idle": 1}


def test_runtime_is_admin_only(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway, extra={"auth": {"admin_keys": [ADMIN_KEY]}})
    as_client = httpx.get(f"{gw.base_url}/admin/runtime", headers=AUTH, timeout=15)
    assert as_client.status_code in (401, 403)
    assert "asyncio_tasks" not in as_client.text
