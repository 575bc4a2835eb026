"""Over the wire: the admin API's live configuration — providers, the chain, live settings, the OpenAPI
document — applied without a restart, persisted, and winning over the YAML on the next start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import MODEL, MakeGateway, sdk, upstream

ADMIN_KEY = "sk-admin-config"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def admin_gateway(make_gateway: MakeGateway, providers: dict[str, list[str]], **kwargs: Any) -> GatewayServer:
    extra = kwargs.pop("extra", {})
    return make_gateway(providers, extra={"auth": {"admin_keys": [ADMIN_KEY]}, **extra}, **kwargs)


def ask(gw: GatewayServer, model: str = "auto") -> str:
    raw = sdk(gw).chat.completions.with_raw_response.create(model=model, messages=[{"role": "user", "content": "hi"}])
    return str(raw.headers["x-routed-via"])


def test_put_chain_reorders_auto_at_once(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = admin_gateway(make_gateway, {a: [MODEL], b: [MODEL]})
    assert ask(gw) == f"{a}/{MODEL}"
    resp = httpx.put(f"{gw.base_url}/admin/chain", json={"chain": [f"{b}/{MODEL}", f"{a}/{MODEL}"]}, headers=ADMIN)
    assert resp.status_code == 200
    assert resp.json()["chain"] == [f"{b}/{MODEL}", f"{a}/{MODEL}"]
    assert ask(gw) == f"{b}/{MODEL}"
    assert httpx.get(f"{gw.base_url}/admin/chain", headers=ADMIN).json()["chain"][0] == f"{b}/{MODEL}"


@pytest.mark.parametrize(
    "body",
    [{"chain": ["nowhere/model"]}, {"chain": "a/b"}, {"chain": [1]}, {"order": []}, []],
)
def test_a_bad_chain_is_a_400_and_nothing_changes(make_gateway: MakeGateway, body: Any) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = admin_gateway(make_gateway, {a: [MODEL], b: [MODEL]})
    resp = httpx.put(f"{gw.base_url}/admin/chain", json=body, headers=ADMIN)
    assert resp.status_code == 400 and "error" in resp.json()
    assert ask(gw) == f"{a}/{MODEL}"


def test_live_settings_change_the_strategy_and_reject_junk(make_gateway: MakeGateway) -> None:
    small, big = unique("small"), unique("big")
    gw = admin_gateway(
        make_gateway,
        {small: ["tiny-model"], big: ["huge-model"]},
        model_options={f"{small}/tiny-model": {"tier": "small"}, f"{big}/huge-model": {"tier": "frontier"}},
    )
    url = f"{gw.base_url}/admin/settings"
    assert httpx.get(url, headers=ADMIN).json()["routing"]["strategy"] == "priority"
    assert ask(gw) == f"{small}/tiny-model"
    resp = httpx.patch(url, json={"routing": {"strategy": "smartest"}}, headers=ADMIN)
    assert resp.status_code == 200 and resp.json()["routing"]["strategy"] == "smart"
    assert ask(gw) == f"{big}/huge-model"
    for junk in ({"routing": {"strategy": "quickest"}}, {"server": {"port": 1}}, {"routing": {"nope": 1}}, {"cache": 3}):
        bad = httpx.patch(url, json=junk, headers=ADMIN)
        assert bad.status_code == 400, junk
    assert httpx.get(url, headers=ADMIN).json()["routing"]["strategy"] == "smart"


def test_add_a_provider_and_list_it(make_gateway: MakeGateway, sim: SimServer) -> None:
    a, c = unique("alpha"), unique("gamma")
    gw = admin_gateway(make_gateway, {a: [MODEL]})
    provider = {"name": c, "kind": "openai", "base_url": f"{sim.base_url}/{c}/v1", "models": [{"id": "gamma-model"}]}
    resp = httpx.post(f"{gw.base_url}/admin/providers", json=provider, headers=ADMIN)
    assert resp.status_code == 201, resp.text
    assert resp.json()["name"] == c and resp.json()["keys"] == []
    listed = {p["name"]: p for p in httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"]}
    assert set(listed) == {a, c}
    [key] = listed[a]["keys"]
    assert key["masked"].startswith("…") and len(key["masked"]) <= 5 and key["source"] == "config"
    assert key["status"] in ("unknown", "healthy") and key["enabled"] is True
    assert f"{a}-key-1" not in httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).text


@pytest.mark.parametrize(
    ("provider", "status"),
    [
        ({"name": "<dup>", "base_url": "http://127.0.0.1:9/v1"}, 409),
        ({"name": "new-one"}, 400),
        ({"name": "new-one", "base_url": "ftp://example.com/v1"}, 400),
        ({"name": "new-one", "base_url": "not a url"}, 400),
        ({"name": "new-one", "base_url": "http://127.0.0.1:9/v1", "kind": "cobol"}, 400),
        ({"name": "bad/name", "base_url": "http://127.0.0.1:9/v1"}, 400),
    ],
)
def test_an_invalid_provider_is_refused_and_nothing_is_written(
    make_gateway: MakeGateway, provider: dict[str, Any], status: int
) -> None:
    a = unique("alpha")
    gw = admin_gateway(make_gateway, {a: [MODEL]})
    body = {k: (a if v == "<dup>" else v) for k, v in provider.items()}
    resp = httpx.post(f"{gw.base_url}/admin/providers", json=body, headers=ADMIN)
    assert resp.status_code == status, resp.text
    assert [p["name"] for p in httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"]] == [a]
    assert gw.run(gw.state.store.get_setting("admin_overlay")) is None


def test_an_oversized_or_malformed_admin_body_is_refused(make_gateway: MakeGateway) -> None:
    a = unique("alpha")
    gw = admin_gateway(make_gateway, {a: [MODEL]}, extra={"server": {"admin_body_limit_kb": 1}})
    big = httpx.put(f"{gw.base_url}/admin/chain", json={"chain": ["x" * 2000]}, headers=ADMIN)
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
    bad = httpx.put(f"{gw.base_url}/admin/chain", content=b"{not json", headers=ADMIN)
    assert bad.status_code == 400 and "error" in bad.json()


def test_every_admin_route_wants_the_admin_key_and_is_documented(make_gateway: MakeGateway) -> None:
    """Every route the app registers under /admin/ — read from the router, so a new one is covered."""
    a = unique("alpha")
    gw = admin_gateway(make_gateway, {a: [MODEL]})
    registered = {
        (route.method.lower(), info["formatter"] if "formatter" in info else info["path"])
        for route in gw.runner.app.router.routes()
        if route.method != "HEAD" and (info := route.resource.get_info() if route.resource else {})
        and str(info.get("formatter", info.get("path", ""))).startswith("/admin/")
    }
    assert ("get", "/admin/requests") in registered and ("get", "/admin/analytics") in registered
    doc = httpx.get(f"{gw.base_url}/admin/openapi.json", headers={"x-api-key": ADMIN_KEY}).json()
    assert doc["openapi"].startswith("3.")
    documented = {(method, path) for path, ops in doc["paths"].items() for method in ops}
    assert registered <= documented, registered - documented
    assert {p["name"] for p in doc["paths"]["/admin/analytics"]["get"]["parameters"]} == {"window"}
    for method, template in sorted(registered):
        path = template.replace("{name}", a).replace("{key_id}", "x")
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer sk-test-client"}):
            resp = httpx.request(method.upper(), f"{gw.base_url}{path}", headers=headers, json={})
            assert resp.status_code == 401, (method, path, headers)
            assert "error" in resp.json()


def test_changes_win_over_the_yaml_on_the_next_start(
    servers_loop: BackgroundLoop, sim: SimServer, sim_control: SimControl, tmp_path: Path
) -> None:
    a, b = unique("alpha"), unique("beta")
    settings = gateway_settings(
        tmp_path / "data", sim.base_url, {a: [MODEL], b: [MODEL]}, extra={"auth": {"admin_keys": [ADMIN_KEY]}}
    )
    first = start_gateway(servers_loop, settings)
    try:
        resp = httpx.put(f"{first.base_url}/admin/chain", json={"chain": [f"{b}/{MODEL}"]}, headers=ADMIN)
        assert resp.status_code == 200
    finally:
        first.close()
    second = start_gateway(servers_loop, settings)
    try:
        assert ask(second) == f"{b}/{MODEL}"
        assert upstream(sim_control, a) == []
    finally:
        second.close()


# ---- keys added at run time ----------------------------------------------------------------------------------


def test_a_key_added_through_the_api_serves_and_is_never_written_in_the_clear(
    make_gateway: MakeGateway, sim_control: SimControl, tmp_path: Path
) -> None:
    a = unique("alpha")
    gw = admin_gateway(make_gateway, {a: [MODEL]}, keys={a: []})
    secret = f"sk-live-{unique('secret')}-AbCd"
    no_key = httpx.post(
        f"{gw.v1}/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": "Bearer sk-test-client"},
    )
    assert no_key.status_code == 503  # no key yet
    resp = httpx.post(f"{gw.base_url}/admin/providers/{a}/keys", json={"key": secret}, headers=ADMIN)
    assert resp.status_code == 201 and resp.json()["masked"] == "…AbCd"
    key_id = resp.json()["id"]
    assert ask(gw) == f"{a}/{MODEL}"
    [sent] = upstream(sim_control, a)
    assert sent["key"] == secret  # the upstream got the real key
    listing = httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN)
    [key] = next(p for p in listing.json()["data"] if p["name"] == a)["keys"]
    assert key == {"id": key_id, "masked": "…AbCd", "enabled": True, "status": "unknown", "source": "runtime"}
    assert secret not in listing.text
    # the same key again is a conflict; junk keys are 400s
    assert httpx.post(f"{gw.base_url}/admin/providers/{a}/keys", json={"key": secret}, headers=ADMIN).status_code == 409
    for junk in ({"key": ""}, {"key": "   "}, {"key": 42}, {"key": "sk-\x00bad"}, {"key": "two words"}, {}):
        assert httpx.post(f"{gw.base_url}/admin/providers/{a}/keys", json=junk, headers=ADMIN).status_code == 400
    # disabled: no longer served; enabled again: served
    off = httpx.patch(f"{gw.base_url}/admin/providers/{a}/keys/{key_id}", json={"enabled": False}, headers=ADMIN)
    assert off.status_code == 200 and off.json()["status"] == "disabled"
    blocked = httpx.post(
        f"{gw.v1}/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": "Bearer sk-test-client"},
    )
    assert blocked.status_code == 503
    httpx.patch(f"{gw.base_url}/admin/providers/{a}/keys/{key_id}", json={"enabled": True}, headers=ADMIN)
    assert ask(gw) == f"{a}/{MODEL}"
    # nothing on disk, in the request log or in the store's settings holds the secret in the clear
    gw.run(gw.state.store.flush())
    rows = gw.run(gw.state.store.recent_requests(50))
    assert all(secret not in repr(r) for r in rows)
    data_dir = gw.state.data_dir
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    # removed: gone from the listing, the provider has no key again
    gone = httpx.delete(f"{gw.base_url}/admin/providers/{a}/keys/{key_id}", headers=ADMIN)
    assert gone.status_code == 200
    assert next(p for p in httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"] if p["name"] == a)["keys"] == []


def test_a_configured_key_can_be_disabled_but_not_deleted(make_gateway: MakeGateway) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = admin_gateway(make_gateway, {a: [MODEL], b: [MODEL]})
    [key] = next(p for p in httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"] if p["name"] == a)["keys"]
    assert httpx.delete(f"{gw.base_url}/admin/providers/{a}/keys/{key['id']}", headers=ADMIN).status_code == 409
    assert httpx.patch(f"{gw.base_url}/admin/providers/{a}/keys/{key['id']}", json={"enabled": False}, headers=ADMIN).status_code == 200
    assert ask(gw) == f"{b}/{MODEL}"
    assert httpx.patch(f"{gw.base_url}/admin/providers/{a}/keys/{key['id']}", json={"enabled": "no"}, headers=ADMIN).status_code == 400
    assert httpx.patch(f"{gw.base_url}/admin/providers/{a}/keys/nope", json={"enabled": True}, headers=ADMIN).status_code == 404


def test_testing_a_key_makes_one_cheap_call(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a = unique("alpha")
    gw = admin_gateway(make_gateway, {a: [MODEL]})
    [key] = next(p for p in httpx.get(f"{gw.base_url}/admin/providers", headers=ADMIN).json()["data"] if p["name"] == a)["keys"]
    ok = httpx.post(f"{gw.base_url}/admin/providers/{a}/keys/{key['id']}/test", headers=ADMIN).json()
    assert ok["ok"] is True and ok["upstream_status"] == 200 and ok["status"] == "healthy"
    sim_control.script(a, {"status": 401}, endpoint="models")
    bad = httpx.post(f"{gw.base_url}/admin/providers/{a}/keys/{key['id']}/test", headers=ADMIN).json()
    assert bad["ok"] is False and bad["upstream_status"] == 401 and bad["status"] == "invalid"
    assert len(sim_control.requests(a, endpoint="models")) == 2 and upstream(sim_control, a) == []
