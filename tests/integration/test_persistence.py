"""Over the wire: what a restart keeps — cooldowns and the request log — in the SQLite data directory.

Each test runs one gateway, closes it (a clean shutdown flushes the write-behind store), and starts a
*new* gateway on the same data directory and the same providers. The simulator's request log proves
which routes the new process did or did not call.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from freellm.store.base import RequestLogRow
from freellm.store.factory import DB_FILENAME
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique

AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}


def chat(
    gw: GatewayServer, request_id: str, *, model: str = "auto", stream: bool = False, text: str = "Hello"
) -> httpx.Response:
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}
    # Reading the whole response (``httpx.post``) returns only once the handler has finished, i.e.
    # after the request-log row was written: no waiting needed to look for it.
    return httpx.post(
        f"{gw.v1}/chat/completions", json=body, headers={**AUTH, "X-Request-ID": request_id}, timeout=20
    )


def rows_by_id(rows: list[RequestLogRow]) -> dict[str, RequestLogRow]:
    return {r.request_id: r for r in rows}


def db_rows(data_dir: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(data_dir / DB_FILENAME)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


class Restartable:
    """Start, stop and restart gateways on one data directory with one provider set."""

    def __init__(
        self, bg: BackgroundLoop, sim: SimServer, data_dir: Path, providers: dict[str, list[str]], **kw: Any
    ):
        self.bg, self.sim, self.data_dir, self.providers, self.kw = bg, sim, data_dir, providers, kw
        self.running: GatewayServer | None = None

    def start(self) -> GatewayServer:
        assert self.running is None or self.running.closed
        self.running = start_gateway(
            self.bg, gateway_settings(self.data_dir, self.sim.base_url, self.providers, **self.kw)
        )
        return self.running

    def close(self) -> None:
        if self.running is not None:
            self.running.close()


@pytest.fixture
def restartable(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path):  # type: ignore[no-untyped-def]
    made: list[Restartable] = []

    def factory(providers: dict[str, list[str]], **kw: Any) -> Restartable:
        r = Restartable(servers_loop, sim, tmp_path / f"data{len(made)}", providers, **kw)
        made.append(r)
        return r

    yield factory
    for r in made:
        r.close()


# The simulator listens on loopback, and a loopback upstream's ordinary failures cool down for
# ``cooldown_local_s`` whatever their Retry-After says (a local server has no quota). Two ways to get a
# long cooldown from it, both honest: a daily-quota 429, whose Retry-After is authoritative everywhere;
# and a plain 429 with the local cooldown configured as long as the Retry-After.
COOLING_CASES = {
    "daily-quota-retry-after": (
        {"status": 429, "retry_after": 120, "error_message": "Daily request quota exhausted"},
        {},
        "daily_quota_exhausted",
        "authoritative",
    ),
    "plain-429-local": (
        {"status": 429, "retry_after": 120, "error_message": "rate limited"},
        {"fallback": {"cooldown_local_s": 120}},
        "rate_limited",
        "heuristic",
    ),
}


@pytest.mark.parametrize("case", list(COOLING_CASES))
def test_restart_keeps_cooldowns(restartable, sim_control: SimControl, case: str) -> None:  # type: ignore[no-untyped-def]
    scenario, extra, error_class, source = COOLING_CASES[case]
    alpha, beta = unique("alpha"), unique("beta")
    gws = restartable({alpha: ["model-x"], beta: ["model-x"]}, extra=extra)
    gw = gws.start()
    sim_control.script(alpha, scenario, times=1)

    first = chat(gw, "before-restart")
    assert first.status_code == 200, first.text
    assert first.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert first.headers["X-Fallback-Trail"] == f"{alpha}/model-x key1={error_class}"
    assert len(sim_control.requests(provider=alpha)) == 1
    cooled_at = time.time()
    gws.close()

    # On disk after a clean shutdown: one cooldown for alpha's key, ~120 s long.
    ((scope, until, stored_source, reason),) = db_rows(
        gws.data_dir, "SELECT scope, until, source, reason FROM cooldowns"
    )
    assert scope.startswith(f"{alpha}\x1fmodel-x\x1f")
    assert 100 <= until - cooled_at <= 125
    assert stored_source == source and reason == error_class

    # A new process on the same data dir skips the cooled route without calling it.
    gw2 = gws.start()
    after = chat(gw2, "after-restart")
    assert after.status_code == 200, after.text
    assert after.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert "X-Fallback-Attempts" not in after.headers
    assert len(sim_control.requests(provider=alpha)) == 1  # never called again
    assert len(sim_control.requests(provider=beta)) == 2

    # Pinned to the cooled route: refused up front with the persisted retry time.
    pinned = chat(gw2, "pinned-after-restart", model=f"{alpha}/model-x")
    assert pinned.status_code == 429, pinned.text
    err = pinned.json()["error"]
    assert err["code"] == "rate_limit_exceeded"
    assert 100_000 <= err["retryAtMs"] - int(cooled_at * 1000) <= 125_000
    assert 90 <= int(pinned.headers["Retry-After"]) <= 121
    assert len(sim_control.requests(provider=alpha)) == 1


def test_restart_forgets_expired_cooldowns(restartable, sim_control: SimControl) -> None:  # type: ignore[no-untyped-def]
    alpha = unique("alpha")
    gws = restartable({alpha: ["model-x"]}, extra={"fallback": {"cooldown_local_s": 0}})
    gw = gws.start()
    sim_control.script(alpha, {"status": 500}, times=1)
    assert chat(gw, "fails").status_code == 502
    gws.close()
    gw2 = gws.start()
    resp = chat(gw2, "works")
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Routed-Via"] == f"{alpha}/model-x"


def test_restart_keeps_the_daily_request_counter(restartable, sim_control: SimControl) -> None:  # type: ignore[no-untyped-def]
    alpha, beta = unique("alpha"), unique("beta")
    gws = restartable(
        {alpha: ["model-x"], beta: ["model-x"]}, model_options={f"{alpha}/model-x": {"limits": {"rpd": 1}}}
    )
    gw = gws.start()
    assert chat(gw, "uses-the-day").headers["X-Routed-Via"] == f"{alpha}/model-x"
    gws.close()

    gw2 = gws.start()
    resp = chat(gw2, "day-is-spent")
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert "X-Fallback-Attempts" not in resp.headers  # passed over by the router, not a failed hop
    assert len(sim_control.requests(provider=alpha)) == 1


def test_request_log_rows_survive_a_restart(restartable, sim_control: SimControl) -> None:  # type: ignore[no-untyped-def]
    alpha, beta, gamma = unique("alpha"), unique("beta"), unique("gamma")
    # gamma (two keys, outside the chain) is the pinned route whose keys both fail authentication.
    gws = restartable(
        {alpha: ["model-x"], beta: ["model-x"], gamma: ["model-y"]},
        chain=[f"{alpha}/model-x", f"{beta}/model-x"],
        keys={gamma: ["gamma-key-1", "gamma-key-2"]},
    )
    gw = gws.start()
    sim_control.script(alpha, {"status": 500}, match="fail over once", times=1)
    sim_control.script(beta, {"first_byte_delay_ms": 60}, match="slow reply", times=1)
    sim_control.script(gamma, {"status": 401}, times=2)

    failover = chat(gw, "log-failover", text="fail over once please")
    assert failover.status_code == 200 and failover.headers["X-Fallback-Attempts"] == "1"
    slow = chat(gw, "log-slow-stream", stream=True, text="a slow reply please")
    assert slow.status_code == 200 and "data: [DONE]" in slow.text
    broken = chat(gw, "log-exhausted", model=f"{gamma}/model-y")
    assert broken.status_code == 502 and broken.headers["X-Fallback-Attempts"] == "2"
    unknown = chat(gw, "log-unknown-model", model="no-such-model")
    assert unknown.status_code == 404

    live = rows_by_id(gw.run(gw.state.store.recent_requests()))
    usage = failover.json()["usage"]

    row = live["log-failover"]
    assert row.surface == "chat" and row.requested_model == "auto" and row.stream is False
    assert row.route == f"{beta}/model-x" and row.status == 200 and row.outcome == "success"
    assert row.attempts == 2 and row.error_class is None
    assert row.latency_ms >= 0 and row.ttfb_ms is not None and 0 <= row.ttfb_ms <= row.latency_ms
    assert (row.tokens_in, row.tokens_out) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert row.tokens_in > 0 and row.tokens_out > 0

    row = live["log-slow-stream"]
    assert row.stream is True and row.status == 200 and row.attempts == 1
    assert row.route == f"{alpha}/model-x" or row.route == f"{beta}/model-x"
    assert row.ttfb_ms is not None and row.latency_ms >= row.ttfb_ms
    if row.route == f"{beta}/model-x":  # the scripted slow first byte
        assert row.ttfb_ms >= 60
    assert row.tokens_out > 0

    row = live["log-exhausted"]
    assert row.status == 502 and row.outcome == "error" and row.route is None
    assert row.requested_model == f"{gamma}/model-y"
    assert row.attempts == 2 and row.error_class == "auth"
    assert row.ttfb_ms is None and row.tokens_in == 0 and row.tokens_out == 0

    row = live["log-unknown-model"]
    assert row.status == 404 and row.outcome == "error" and row.requested_model == "no-such-model"
    assert row.attempts == 0 and row.route is None

    gws.close()
    stored = db_rows(
        gws.data_dir,
        "SELECT request_id, route, status, attempts, latency_ms, ttfb_ms, tokens_in, tokens_out, outcome "
        "FROM requests ORDER BY rowid",
    )
    assert [r[0] for r in stored] == ["log-failover", "log-slow-stream", "log-exhausted", "log-unknown-model"]
    on_disk = {r[0]: r[1:] for r in stored}
    for request_id, row in live.items():
        assert on_disk[request_id] == (
            row.route,
            row.status,
            row.attempts,
            row.latency_ms,
            row.ttfb_ms,
            row.tokens_in,
            row.tokens_out,
            row.outcome,
        )

    # The new process reads the same rows back (its in-memory ring is empty: they come from SQLite).
    gw2 = gws.start()
    restored = gw2.run(gw2.state.store.recent_requests())
    assert [r.request_id for r in restored] == [
        "log-unknown-model",
        "log-exhausted",
        "log-slow-stream",
        "log-failover",
    ]
    assert rows_by_id(restored)["log-failover"] == live["log-failover"]
    assert chat(gw2, "log-after-restart").status_code == 200
    newest = gw2.run(gw2.state.store.recent_requests(limit=2))
    assert [r.request_id for r in newest] == ["log-after-restart", "log-unknown-model"]


def test_client_errors_before_routing_are_not_logged_as_turns(restartable) -> None:  # type: ignore[no-untyped-def]
    gws = restartable({unique("alpha"): ["model-x"]})
    gw = gws.start()
    bad = httpx.post(
        f"{gw.v1}/chat/completions", content=b"{", headers={**AUTH, "X-Request-ID": "bad-json"}, timeout=10
    )
    assert bad.status_code == 400
    ok = chat(gw, "good")
    assert ok.status_code == 200
    ids = [r.request_id for r in gw.run(gw.state.store.recent_requests())]
    assert ids == ["good"]
