"""Over the wire: ``GET /v1/models`` (spec §10), ``GET /health`` and the non-chat edges of the router."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import openai
import pytest
from openai import OpenAI

from tests.harness import CLIENT_KEY, GatewayServer, unique

MakeGateway = Callable[..., GatewayServer]

AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}


def get_models(gw: GatewayServer, query: str = "", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{gw.v1}/models{query}", headers=AUTH if headers is None else headers, timeout=10)


def by_id(resp: httpx.Response) -> dict[str, dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["object"] == "list"
    return {m["id"]: m for m in body["data"]}


@pytest.fixture
def mixed(make_gateway: MakeGateway) -> tuple[GatewayServer, dict[str, str]]:
    """alpha+beta serve model-x (a group, 8k and 32k context); gamma (no keys) serves model-y;
    delta serves model-z (disabled) and model-w (128k)."""
    names = {n: unique(n) for n in ("alpha", "beta", "gamma", "delta")}
    a, b, g, d = names["alpha"], names["beta"], names["gamma"], names["delta"]
    gw = make_gateway(
        {a: ["model-x"], b: ["model-x"], g: ["model-y"], d: ["model-z", "model-w"]},
        keys={g: []},
        model_options={
            f"{a}/model-x": {"context_window": 8192},
            f"{b}/model-x": {"context_window": 32768},
            f"{g}/model-y": {"context_window": 1_000_000},
            f"{d}/model-z": {"enabled": False, "context_window": 2_000_000},
            f"{d}/model-w": {"context_window": 131072},
        },
        chain=[f"{g}/model-y", f"{a}/model-x", f"{b}/model-x", f"{d}/model-w"],
    )
    return gw, names


def test_models_lists_auto_first_then_every_model(mixed: tuple[GatewayServer, dict[str, str]]) -> None:
    gw, n = mixed
    resp = get_models(gw)
    assert resp.headers.get("X-Request-ID")
    data = resp.json()["data"]
    assert [m["id"] for m in data] == ["auto", "fusion", "model-x", "model-y", "model-z", "model-w"]
    for m in data:
        assert m["object"] == "model" and m["created"] == 0 and isinstance(m["owned_by"], str)
        assert m["context_length"] == m["context_window"]
    models = by_id(resp)

    auto = models["auto"]
    assert auto["available"] is True and auto["unavailable_reason"] is None
    # The largest context among *available* models: gamma's million and the disabled model don't count.
    assert auto["context_window"] == 131072

    x = models["model-x"]
    assert x["available"] is True and x["unavailable_reason"] is None
    assert x["context_window"] == 32768  # the group's maximum
    assert x["providers"] == [f"{n['alpha']}/model-x", f"{n['beta']}/model-x"]

    y = models["model-y"]
    assert y["available"] is False and y["unavailable_reason"] == "no_key"

    z = models["model-z"]
    assert z["available"] is False and z["unavailable_reason"] == "disabled"

    assert models["model-w"]["available"] is True


@pytest.mark.parametrize(
    "query", ["?available=1", "?available=true", "?available=YES", "?ready=1", "?connected=1"]
)
def test_models_available_filter(mixed: tuple[GatewayServer, dict[str, str]], query: str) -> None:
    gw, _ = mixed
    models = by_id(get_models(gw, query))
    assert list(models) == ["auto", "fusion", "model-x", "model-w"]
    assert all(m["available"] for m in models.values())


@pytest.mark.parametrize("query", ["?available=0", "?available=false", "?available=", "?other=1"])
def test_models_filter_off_lists_everything(mixed: tuple[GatewayServer, dict[str, str]], query: str) -> None:
    gw, _ = mixed
    assert len(by_id(get_models(gw, query))) == 6


def test_models_through_the_openai_sdk(mixed: tuple[GatewayServer, dict[str, str]]) -> None:
    gw, _ = mixed
    client = OpenAI(base_url=gw.v1, api_key=CLIENT_KEY, max_retries=0, timeout=10)
    ids = [m.id for m in client.models.list()]
    assert ids == ["auto", "fusion", "model-x", "model-y", "model-z", "model-w"]
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=gw.v1, api_key="wrong", max_retries=0, timeout=10).models.list()


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer nope"}, {"x-api-key": "nope"}],
    ids=["none", "wrong-bearer", "wrong-x-api-key"],
)
def test_models_requires_auth(mixed: tuple[GatewayServer, dict[str, str]], headers: dict[str, str]) -> None:
    gw, _ = mixed
    resp = get_models(gw, headers=headers)
    assert resp.status_code == 401
    assert resp.json()["error"]["type"] == "authentication_error"
    assert resp.headers.get("X-Request-ID")


@pytest.mark.parametrize("header", ["x-api-key", "x-goog-api-key"])
def test_models_accepts_alternative_key_headers(
    mixed: tuple[GatewayServer, dict[str, str]], header: str
) -> None:
    gw, _ = mixed
    assert get_models(gw, headers={header: CLIENT_KEY}).status_code == 200


def test_models_when_nothing_has_a_key(make_gateway: MakeGateway) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, keys={alpha: []})
    models = by_id(get_models(gw))
    assert models["auto"]["available"] is False
    assert models["auto"]["context_window"] is None
    assert models["model-x"]["unavailable_reason"] == "no_key"
    assert by_id(get_models(gw, "?available=1")) == {}


def test_models_is_rate_limited_like_the_rest_of_v1(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]}, extra={"server": {"ip_rate_limit_rpm": 50}})
    resp = get_models(gw)
    assert resp.status_code == 200
    assert resp.headers["X-RateLimit-Limit"] == "50"


def test_health_needs_no_auth(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]}, extra={"server": {"ip_rate_limit_rpm": 1}})
    for headers in ({}, {"Authorization": "Bearer wrong"}, AUTH):
        resp = httpx.get(f"{gw.base_url}/health", headers=headers, timeout=10)
        assert resp.status_code == 200
        assert resp.json() == {"status": "ok"}
        assert resp.headers.get("X-Request-ID")
        assert "X-RateLimit-Limit" not in resp.headers  # the limiter guards /v1 only
    echoed = httpx.get(f"{gw.base_url}/health", headers={"X-Request-ID": "probe-1"}, timeout=10)
    assert echoed.headers["X-Request-ID"] == "probe-1"


def test_unknown_paths_and_methods_are_json_errors_not_500(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]})
    missing = httpx.get(f"{gw.v1}/nope", headers=AUTH, timeout=10)
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "invalid_request_error"
    assert missing.headers.get("X-Request-ID")
    # Unauthenticated probing of /v1 learns nothing but 401.
    assert httpx.get(f"{gw.v1}/nope", timeout=10).status_code == 401
    wrong_method = httpx.get(f"{gw.v1}/chat/completions", headers=AUTH, timeout=10)
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["message"]
    assert "POST" in wrong_method.headers.get("Allow", "")
    outside = httpx.get(f"{gw.base_url}/nothing-here", timeout=10)
    assert outside.status_code in (401, 404)
    assert outside.json()["error"]


def test_only_disabled_models_leave_auto_unavailable(make_gateway: MakeGateway) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, model_options={f"{alpha}/model-x": {"enabled": False}})
    models = by_id(get_models(gw))
    assert models["auto"]["available"] is False
    assert models["model-x"]["unavailable_reason"] == "disabled"
    resp = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        headers=AUTH,
        timeout=10,
    )
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] == "no_providers_configured"
