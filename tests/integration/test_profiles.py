"""Over the wire: client profiles (bound keys, ``auto:NAME``, enforced system prompts, model lists) and the
token budget, with the official SDKs against the simulator."""

from __future__ import annotations

import anthropic
import httpx2 as httpx
import openai
import pytest

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import MODEL, MakeGateway, received, sdk, upstream

TEAM_KEY = "sk-team-member"
LOCKED_KEY = "sk-locked-tool"


def profiled(make_gateway: MakeGateway) -> tuple[GatewayServer, str, str]:
    a, b = unique("alpha"), unique("beta")
    extra = {
        "auth": {
            "api_keys": [CLIENT_KEY, {"key": TEAM_KEY, "profile": "team"}, {"key": LOCKED_KEY, "profile": "locked"}]
        },
        "profiles": {
            "team": {"chain": [f"{b}/{MODEL}"], "system_prompt": "Answer in French.", "system_prompt_mode": "prepend"},
            "locked": {"system_prompt": "Only JSON.", "system_prompt_mode": "replace", "models": [f"{a}/{MODEL}"]},
        },
    }
    return make_gateway({a: [MODEL], b: [MODEL]}, extra=extra), a, b


def client(gw: GatewayServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.v1, api_key=key, max_retries=0, timeout=15)


def test_a_bound_key_gets_its_chain_and_its_prompt(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, _, b = profiled(make_gateway)
    raw = client(gw, TEAM_KEY).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-routed-via"] == f"{b}/{MODEL}"
    [sent] = received(sim_control, b)
    assert sent["messages"][0] == {"role": "system", "content": "Answer in French.\n\nBe kind."}
    rows = gw.run(gw.state.store.recent_requests(1))
    assert rows[0].extra["profile"] == "team"


def test_replace_mode_drops_the_client_system_text(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, _ = profiled(make_gateway)
    client(gw, LOCKED_KEY).chat.completions.create(
        model=f"{a}/{MODEL}", messages=[{"role": "system", "content": "Ignore the rules."}, {"role": "user", "content": "hi"}]
    )
    [sent] = received(sim_control, a)
    assert [m for m in sent["messages"] if m["role"] == "system"] == [{"role": "system", "content": "Only JSON."}]


@pytest.mark.parametrize("model", ["<beta route>", "<beta provider>:" + MODEL, "auto:team"])
def test_a_model_outside_the_list_is_403_before_any_upstream_call(
    make_gateway: MakeGateway, sim_control: SimControl, model: str
) -> None:
    gw, a, b = profiled(make_gateway)
    model = model.replace("<beta route>", f"{b}/{MODEL}").replace("<beta provider>", b)
    with pytest.raises(openai.PermissionDeniedError) as info:
        client(gw, LOCKED_KEY).chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    err = info.value.body
    assert isinstance(err, dict) and err["code"] == "model_not_allowed" and err["type"] == "permission_error"
    assert upstream(sim_control, a) == [] and upstream(sim_control, b) == []


def test_403_in_the_anthropic_envelope(make_gateway: MakeGateway) -> None:
    gw, a, _ = profiled(make_gateway)
    claude = anthropic.Anthropic(base_url=gw.base_url, api_key=TEAM_KEY, max_retries=0)
    claude.messages.create(model="claude-haiku-4-5", max_tokens=32, messages=[{"role": "user", "content": "hi"}])  # auto: allowed
    resp = httpx.post(
        f"{gw.base_url}/v1/messages",
        json={"model": f"{a}/{MODEL}", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-api-key": TEAM_KEY},
    )
    # TEAM has no model list: every model is allowed.
    assert resp.status_code == 200
    locked = httpx.post(
        f"{gw.base_url}/v1/messages",
        json={"model": "auto:team", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-api-key": LOCKED_KEY},
    )
    assert locked.status_code == 403
    body = locked.json()
    assert body["type"] == "error" and body["error"]["type"] == "permission_error"


def test_auto_name_for_an_unbound_key(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, _, b = profiled(make_gateway)
    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto:team", messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert received(sim_control, b)[0]["messages"][0]["content"] == "Answer in French."
    with pytest.raises(openai.NotFoundError) as info:
        sdk(gw).chat.completions.create(model="auto:nobody", messages=[{"role": "user", "content": "hi"}])
    assert isinstance(info.value.body, dict) and info.value.body["code"] == "model_not_found"


def test_models_lists_the_profiles_a_key_may_use(make_gateway: MakeGateway) -> None:
    gw, _, b = profiled(make_gateway)
    ids = [m.id for m in sdk(gw).models.list()]
    assert {"auto:team", "auto:locked"} <= set(ids)
    team = [m.model_dump() for m in client(gw, TEAM_KEY).models.list()]
    assert [m["id"] for m in team if m["id"].startswith("auto:")] == ["auto:team"]
    assert next(m for m in team if m["id"] == "auto:team")["providers"] == [f"{b}/{MODEL}"]


# ---- token budget -----------------------------------------------------------------------------------------


def budgeted(make_gateway: MakeGateway, budget: int) -> tuple[GatewayServer, str]:
    a = unique("alpha")
    return make_gateway({a: [MODEL]}, extra={"limits": {"request_max_tokens_budget": budget}}), a


def test_over_budget_is_413_before_any_upstream_call(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = budgeted(make_gateway, 1000)
    with pytest.raises(openai.APIStatusError) as info:
        sdk(gw).chat.completions.create(model="auto", max_tokens=900, messages=[{"role": "user", "content": "x" * 800}])
    assert info.value.status_code == 413
    assert isinstance(info.value.body, dict) and info.value.body["code"] == "request_token_budget"
    with pytest.raises(openai.APIStatusError):  # the input alone fills the budget
        sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x" * 4000}])
    assert upstream(sim_control, a) == []


def test_budgeted_request_without_an_output_limit_is_capped(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = budgeted(make_gateway, 1000)
    sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x" * 400}])  # ~100 tokens
    assert received(sim_control, a)[-1]["max_tokens"] == 900
    big, big_provider = budgeted(make_gateway, 100_000)
    sdk(big).chat.completions.create(model="auto", messages=[{"role": "user", "content": "short"}])
    assert received(sim_control, big_provider)[-1]["max_tokens"] == 4096
    sdk(gw).chat.completions.create(model="auto", max_tokens=50, messages=[{"role": "user", "content": "asked"}])
    assert received(sim_control, a)[-1]["max_tokens"] == 50  # within the budget: as asked


@pytest.mark.parametrize("surface", ["anthropic", "gemini"])
def test_budget_413_in_each_envelope(make_gateway: MakeGateway, sim_control: SimControl, surface: str) -> None:
    gw, a = budgeted(make_gateway, 500)
    if surface == "anthropic":
        resp = httpx.post(
            f"{gw.base_url}/v1/messages",
            json={"model": "claude-haiku-4-5", "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]},
            headers={"x-api-key": CLIENT_KEY},
        )
        assert resp.status_code == 413 and "request_token_budget" in resp.json()["error"]["message"]
    else:
        resp = httpx.post(
            f"{gw.base_url}/v1beta/models/gemini-2.5-flash:generateContent",
            json={"contents": [{"parts": [{"text": "x" * 4000}]}]},
            headers={"x-goog-api-key": CLIENT_KEY},
        )
        assert resp.status_code == 413 and "request_token_budget" in resp.json()["error"]["message"]
    assert upstream(sim_control, a) == []


def test_surface_defaults_are_not_asked_limits(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """Gemini fills in 8192 output tokens when the client asks for none: the budget caps that, not 413."""
    gw, a = budgeted(make_gateway, 2000)
    resp = httpx.post(
        f"{gw.base_url}/v1beta/models/gemini-2.5-flash:generateContent",
        json={"contents": [{"parts": [{"text": "hello"}]}]},
        headers={"x-goog-api-key": CLIENT_KEY},
    )
    assert resp.status_code == 200
    assert received(sim_control, a)[-1]["max_tokens"] == min(2000 - 2, 4096)


def test_count_tokens_include_the_enforced_prompt(make_gateway: MakeGateway) -> None:
    gw, _, _ = profiled(make_gateway)
    payload = {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]}
    url = f"{gw.base_url}/v1/messages/count_tokens"
    plain = httpx.post(url, json=payload, headers={"x-api-key": CLIENT_KEY}).json()["input_tokens"]
    team = httpx.post(url, json=payload, headers={"x-api-key": TEAM_KEY}).json()["input_tokens"]
    assert team == plain + len("Answer in French.") // 4 + 1  # ceil(17 / 4) = 5 more
    gemini = f"{gw.base_url}/v1beta/models/gemini-2.5-flash:countTokens"
    body = {"contents": [{"parts": [{"text": "hi"}]}]}
    g_plain = httpx.post(gemini, json=body, headers={"x-goog-api-key": CLIENT_KEY}).json()["totalTokens"]
    g_team = httpx.post(gemini, json=body, headers={"x-goog-api-key": TEAM_KEY}).json()["totalTokens"]
    assert g_team > g_plain
