"""Over the wire: routing that learns — strategies from measured statistics, limits learned from what
providers say (429 text here; headers in test_learned_limits_wire.py), retirement, and explain."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx2 as httpx
import openai
import pytest

from freellm.sim.control import SimControl
from freellm.store.base import key_scope
from tests.harness import GatewayServer, unique
from tests.integration.helpers import AUTH, MODEL, MakeGateway, sdk, upstream

ADMIN_KEY = "sk-admin-routing"


def ask(gw: GatewayServer, model: str = "auto") -> str:
    """One non-stream request; the route that answered."""
    raw = sdk(gw).chat.completions.with_raw_response.create(model=model, messages=[{"role": "user", "content": "hi"}])
    return str(raw.headers["x-routed-via"])


def routing(make_gateway: MakeGateway, providers: dict[str, list[str]], **routing: Any) -> GatewayServer:
    extra: dict[str, Any] = {"routing": routing, "auth": {"admin_keys": [ADMIN_KEY]}}
    return make_gateway(providers, extra=extra)


# ---- strategies -----------------------------------------------------------------------------------------


def test_fast_learns_the_quicker_provider_and_priority_keeps_the_chain(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    slow, quick = unique("slow"), unique("quick")
    sim_control.set_default({"first_byte_delay_ms": 300}, provider=slow)
    try:
        gw = routing(make_gateway, {slow: [MODEL], quick: [MODEL]}, stats_ttl_s=0.01, exploration=0.5)
        for _ in range(30):  # warm-up: exploration measures both
            ask(gw, "auto:fast")
        served = Counter(ask(gw, "auto:fastest") for _ in range(20))
        assert served[f"{quick}/{MODEL}"] >= 18, served
        # priority (the default for `auto`) still follows the chain: the slow provider comes first
        assert {ask(gw, "auto") for _ in range(3)} == {f"{slow}/{MODEL}"}
    finally:
        sim_control.set_default(None, provider=slow)


def test_smart_prefers_the_frontier_model(make_gateway: MakeGateway) -> None:
    small, big = unique("small"), unique("big")
    gw = make_gateway(
        {small: ["tiny-model"], big: ["huge-model"]},
        model_options={f"{small}/tiny-model": {"tier": "small"}, f"{big}/huge-model": {"tier": "frontier", "rank": 1}},
    )
    assert ask(gw, "auto:smart") == f"{big}/huge-model"
    assert ask(gw, "auto:intelligence") == f"{big}/huge-model"
    assert ask(gw, "auto") == f"{small}/tiny-model"


def test_a_configured_strategy_orders_plain_auto(make_gateway: MakeGateway) -> None:
    small, big = unique("small"), unique("big")
    gw = make_gateway(
        {small: ["tiny-model"], big: ["huge-model"]},
        model_options={f"{small}/tiny-model": {"tier": "small"}, f"{big}/huge-model": {"tier": "frontier"}},
        extra={"routing": {"strategy": "smartest"}},
    )
    assert ask(gw) == f"{big}/huge-model"
    assert ask(gw, "auto:priority") == f"{small}/tiny-model"


def test_an_unknown_strategy_is_a_404_listing_the_valid_ones(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    with pytest.raises(openai.NotFoundError) as info:
        ask(gw, "auto:quickest")
    err = info.value.body
    assert isinstance(err, dict) and err["code"] == "model_not_found"
    for name in ("priority", "balanced", "fast", "smart", "reliable", "cheap", "budget"):
        assert name in err["message"]


# ---- limits learned from a 429's text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "axis"),
    [("Rate limit exceeded: limit: 2 requests per minute", "rpm"), ("Quota: limit: 50 requests per day", "rpd")],
)
def test_a_429_stating_its_limit_keeps_the_key_out_for_the_window(
    make_gateway: MakeGateway, sim_control: SimControl, message: str, axis: str
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]})
    sim_control.script(a, {"status": 429, "error_message": message})
    assert ask(gw) == f"{b}/{MODEL}"
    assert gw.state.router.learned.learned(f"{a}/{MODEL}") == {axis: int(message.split("limit: ")[1].split()[0])}
    [key] = gw.state.catalog.keys[a]
    record = gw.run(gw.state.store.get_cooldown(key_scope(a, MODEL, key.key_id), time.time()))
    assert record is not None
    if axis == "rpm":  # the heuristic cooldown of a loopback provider is a few seconds: this is longer
        assert record.source == "learned" and record.until - time.time() >= 50
    else:  # the rest of the day (a daily-quota answer already says so)
        assert record.until >= (time.time() // 86_400 + 1) * 86_400 - 1
    for _ in range(3):
        assert ask(gw) == f"{b}/{MODEL}"
    assert len(upstream(sim_control, a)) == 1


# ---- retirement -----------------------------------------------------------------------------------------


def test_a_410_retires_the_model(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: ["old-model"], b: [MODEL]})
    sim_control.script(a, {"status": 410, "error_message": "Gone"})
    assert ask(gw) == f"{b}/{MODEL}"
    models = {m["id"]: m for m in httpx.get(f"{gw.v1}/models", headers=AUTH).json()["data"]}
    assert models["old-model"]["available"] is False
    assert models["old-model"]["unavailable_reason"] == "retired"
    with pytest.raises(openai.NotFoundError) as info:
        ask(gw, f"{a}/old-model")
    assert isinstance(info.value.body, dict) and info.value.body["code"] == "model_not_found"
    assert ask(gw) == f"{b}/{MODEL}"
    assert len(upstream(sim_control, a)) == 1  # never called again


def test_no_longer_available_twice_retires_the_model(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a = unique("alpha")
    gw = make_gateway({a: ["old-model"]}, keys={a: [f"{a}-key-1", f"{a}-key-2"]})  # the second try uses key 2
    gone = {"status": 404, "error_message": "The model old-model is no longer available"}
    sim_control.script(a, gone, times=2)
    with pytest.raises(openai.APIStatusError):
        ask(gw, f"{a}/old-model")
    assert f"{a}/old-model" not in gw.state.router.retired
    with pytest.raises(openai.APIStatusError):
        ask(gw, f"{a}/old-model")
    assert f"{a}/old-model" in gw.state.router.retired


# ---- explain --------------------------------------------------------------------------------------------


def test_explain_lists_the_candidates_with_reasons_and_needs_an_admin_key(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = routing(make_gateway, {a: [MODEL], b: [MODEL]})
    sim_control.script(a, {"status": 500})
    ask(gw)  # a fails and cools down, b answers
    url = f"{gw.base_url}/admin/routing/explain"
    assert httpx.get(url, params={"model": "auto"}).status_code == 401
    assert httpx.get(url, params={"model": "auto"}, headers=AUTH).status_code == 401
    before = len(upstream(sim_control, b))
    resp = httpx.get(url, params={"model": "auto"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["model"] == "auto" and body["strategy"] == "priority"
    assert [c["route"] for c in body["candidates"]] == [f"{a}/{MODEL}", f"{b}/{MODEL}"]
    assert body["candidates"][0] == {"route": f"{a}/{MODEL}", "score": None, "eligible": False, "skip": "cooldown"}
    assert body["candidates"][1]["eligible"] is True and body["candidates"][1]["skip"] is None
    assert body["chosen"] == f"{b}/{MODEL}"
    assert len(upstream(sim_control, b)) == before  # no upstream call
    assert gw.run(gw.state.store.lease_count()) == 0
    scored = httpx.get(url, params={"model": "auto:balanced"}, headers={"x-api-key": ADMIN_KEY}).json()
    assert scored["strategy"] == "balanced" and all(isinstance(c["score"], float) for c in scored["candidates"])
    vision = httpx.get(url, params={"model": "auto", "vision": "true"}, headers={"x-api-key": ADMIN_KEY}).json()
    assert {c["skip"] for c in vision["candidates"]} <= {"no_vision", "cooldown"} and vision["chosen"] is None
    unknown = httpx.get(url, params={"model": "nope"}, headers={"x-api-key": ADMIN_KEY})
    assert unknown.status_code == 404


def test_explain_is_404_without_admin_keys(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    resp = httpx.get(f"{gw.base_url}/admin/routing/explain", params={"model": "auto"}, headers=AUTH)
    assert resp.status_code == 404
