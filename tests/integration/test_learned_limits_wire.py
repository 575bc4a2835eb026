"""Over the wire: rate-limit windows learned from response headers (OpenAI and Anthropic spellings),
configured limits that headers never raise, and the probes that bring keys back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from freellm.store.base import key_scope
from tests.harness import BackgroundLoop, GatewayServer, unique
from tests.integration.helpers import AUTH, MODEL, MakeGateway, MakeMixed, mixed_gateways, sdk, upstream


@pytest.fixture
def make_mixed(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> Iterator[MakeMixed]:
    with mixed_gateways(servers_loop, sim, tmp_path, MODEL) as factory:
        yield factory


def ask(gw: GatewayServer) -> str:
    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    return str(raw.headers["x-routed-via"])


def wait_until(moment: float) -> None:
    """The provider's window resets at a wall-clock moment: waiting for it is the behaviour under test."""
    time.sleep(max(0.0, moment - time.time()))


def learned_until(gw: GatewayServer, provider: str) -> float:
    [key] = gw.state.catalog.keys[provider]
    record = gw.run(gw.state.store.get_cooldown(key_scope(provider, MODEL, key.key_id), time.time()))
    assert record is not None and record.source == "learned", record
    return record.until


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_spent_window_in_the_headers_keeps_the_key_out_until_its_reset(
    make_mixed: MakeMixed, sim_control: SimControl, kind: str
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_mixed({a: kind, b: "openai"})
    if kind == "openai":
        spent: dict[str, Any] = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"}
    else:
        reset = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat().replace("+00:00", "Z")
        spent = {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": reset}
    sim_control.script(a, {"headers": spent})
    assert ask(gw) == f"{a}/{MODEL}"  # the answer itself is fine: it only says the window is spent
    until = learned_until(gw, a)
    assert 0 < until - time.time() <= 2
    for _ in range(3):
        assert ask(gw) == f"{b}/{MODEL}"
    assert len(upstream(sim_control, a)) == 1  # not called within the window
    wait_until(until + 0.05)
    assert ask(gw) == f"{a}/{MODEL}"  # and serves again after it


def test_bad_header_values_are_ignored(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a = unique("alpha")
    gw = make_gateway({a: [MODEL]})
    sim_control.script(
        a, {"headers": {"x-ratelimit-remaining-requests": "-3", "x-ratelimit-reset-requests": "soon", "x-ratelimit-limit-requests": "lots"}}
    )
    assert ask(gw) == f"{a}/{MODEL}"
    assert ask(gw) == f"{a}/{MODEL}"
    assert gw.state.router.learned.learned(f"{a}/{MODEL}") == {}


def test_a_configured_rpm_holds_although_the_headers_say_more(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]}, model_options={f"{a}/{MODEL}": {"limits": {"rpm": 2}}})
    generous = {"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "9", "x-ratelimit-reset-requests": "6s"}
    sim_control.set_default({"headers": generous}, provider=a)
    try:
        served = [ask(gw) for _ in range(4)]
    finally:
        sim_control.set_default(None, provider=a)
    assert served == [f"{a}/{MODEL}", f"{a}/{MODEL}", f"{b}/{MODEL}", f"{b}/{MODEL}"]
    assert gw.state.router.learned.learned(f"{a}/{MODEL}") == {"rpm": 10}
    assert gw.state.router.learned.effective(gw.state.catalog.by_label[f"{a}/{MODEL}".lower()]).rpm == 2


def test_a_learned_limit_fills_a_missing_one(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]})
    window = {"x-ratelimit-limit-requests": "1", "x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "30s"}
    sim_control.script(a, {"headers": window})
    assert ask(gw) == f"{a}/{MODEL}"
    assert ask(gw) == f"{b}/{MODEL}"  # rpm 1 learned: the one request of this minute was used
    assert len(upstream(sim_control, a)) == 1
    stored = gw.run(gw.state.store.get_setting("learned_limits"))
    assert stored is not None and f"{a}/{MODEL}" in stored


# ---- probes -------------------------------------------------------------------------------------------------


def test_a_cooled_down_key_whose_probe_passes_serves_again_early(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway(
        {a: [MODEL], b: [MODEL]},
        extra={"health": {"cooldown_probe_s": 1, "key_check_s": 0}, "fallback": {"cooldown_local_s": 60}},
    )
    sim_control.script(a, {"status": 500})
    assert ask(gw) == f"{b}/{MODEL}"
    [key] = gw.state.catalog.keys[a]
    scope = key_scope(a, MODEL, key.key_id)
    record = gw.run(gw.state.store.get_cooldown(scope, time.time()))
    assert record is not None and record.source == "heuristic" and record.until - time.time() > 50
    prober = gw.state.prober
    assert prober is not None
    now = time.time()
    assert gw.run(prober.cooldown_pass(now)) == 0  # too early: less than min(half, P) has passed
    assert gw.run(prober.cooldown_pass(now + 1.5)) == 1
    [probe] = sim_control.requests(a, endpoint="models")
    assert probe["status"] == 200
    assert gw.run(gw.state.store.get_cooldown(scope, time.time())) is None
    assert ask(gw) == f"{a}/{MODEL}"  # ~58 s before the cooldown would have ended


def test_the_cooldown_probe_runs_on_its_own(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway(
        {a: [MODEL], b: [MODEL]},
        extra={"health": {"cooldown_probe_s": 0.5, "key_check_s": 0}, "fallback": {"cooldown_local_s": 60}},
    )
    sim_control.script(a, {"status": 500})
    assert ask(gw) == f"{b}/{MODEL}"
    [probe] = sim_control.wait_received(a, endpoint="models", timeout=10)
    assert sim_control.wait_ended(probe["id"])["status"] == 200


def test_a_key_rejected_three_times_by_the_health_pass_is_disabled(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a = unique("alpha")
    gw = make_gateway({a: ["lonely-model"]}, extra={"health": {"cooldown_probe_s": 0, "key_check_s": 60}})
    sim_control.script(a, {"status": 401, "error_message": "invalid api key"}, endpoint="models", times=None)
    prober = gw.state.prober
    assert prober is not None
    [key] = gw.state.catalog.keys[a]
    statuses = []
    for _ in range(3):
        assert gw.run(prober.health_pass(time.time(), force=True)) == 1
        statuses.append(gw.state.router.health.status(a, key.key_id))
    assert statuses == ["invalid", "invalid", "disabled"]
    assert gw.run(prober.health_pass(time.time(), force=True)) == 0  # a disabled key is not checked again
    assert len(sim_control.requests(a, endpoint="models")) == 3
    models = {m["id"]: m for m in httpx.get(f"{gw.v1}/models", headers=AUTH).json()["data"]}
    assert models["lonely-model"]["available"] is False
    assert models["lonely-model"]["unavailable_reason"] == "no_healthy_key"
    resp = httpx.post(
        f"{gw.v1}/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}, headers=AUTH
    )
    assert resp.status_code == 503 and upstream(sim_control, a) == []
    stored = gw.run(gw.state.store.get_setting("key_health"))
    assert stored is not None and "disabled" in stored


def test_an_invalid_key_that_checks_out_again_serves(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a = unique("alpha")
    gw = make_gateway({a: [MODEL]}, extra={"health": {"cooldown_probe_s": 0, "key_check_s": 60}})
    sim_control.script(a, {"status": 403}, endpoint="models")
    prober = gw.state.prober
    assert prober is not None
    gw.run(prober.health_pass(time.time(), force=True))
    [key] = gw.state.catalog.keys[a]
    assert gw.state.router.health.status(a, key.key_id) == "invalid"
    resp = httpx.post(
        f"{gw.v1}/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]}, headers=AUTH
    )
    assert resp.status_code == 503
    gw.run(prober.health_pass(time.time()))  # invalid keys are re-checked on every pass: now 200
    assert gw.state.router.health.status(a, key.key_id) == "healthy"
    assert ask(gw) == f"{a}/{MODEL}"
