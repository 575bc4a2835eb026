"""Over the wire: request errors, the exhaustion ladder, pins and groups, the per-IP limiter.

Every test starts its own gateway on its own simulator providers (``unique`` names), scripts the
simulator through its control API, and talks to the gateway exactly as a client would: the official
``openai`` SDK (sync, no retries) for the happy and typed-error paths, raw HTTP for exact statuses,
envelopes and headers. No test sleeps: every wait is on a response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import openai
import pytest
from openai import OpenAI

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import two_routes, upstream

MakeGateway = Callable[..., GatewayServer]

HELLO = [{"role": "user", "content": "Hello"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def sdk(gw: GatewayServer, key: str = CLIENT_KEY) -> OpenAI:
    return OpenAI(base_url=gw.v1, api_key=key, max_retries=0, timeout=20)


def post_chat(
    gw: GatewayServer,
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    auth: bool = True,
) -> httpx.Response:
    """POST /v1/chat/completions with raw HTTP; ``content`` sends bytes as they are."""
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if auth:
        hdrs.setdefault("Authorization", f"Bearer {CLIENT_KEY}")
    if content is None and body is not None:
        return httpx.post(f"{gw.v1}/chat/completions", json=body, headers=hdrs, timeout=20)
    return httpx.post(f"{gw.v1}/chat/completions", content=content or b"", headers=hdrs, timeout=20)


def chat_body(model: str = "auto", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": HELLO, **extra}


def assert_error(resp: httpx.Response, status: int, type_: str, code: str | None = None) -> dict[str, Any]:
    """Exact status, the OpenAI envelope, a JSON content type, and a request id; returns ``error``."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.headers.get("X-Request-ID")
    body = resp.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] == type_, err
    if code is not None:
        assert err.get("code") == code, err
    return err


# ── Request errors ──────────────────────────────────────────────────────────────────────────────────


def test_unknown_model_is_404_model_not_found(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]})
    with pytest.raises(openai.NotFoundError) as info:
        sdk(gw).chat.completions.create(model="no-such-model", messages=HELLO)  # type: ignore[arg-type]
    assert info.value.status_code == 404
    assert info.value.code == "model_not_found"

    resp = post_chat(gw, chat_body("no-such-model"))
    err = assert_error(resp, 404, "invalid_request_error", "model_not_found")
    assert "no-such-model" in err["message"]
    # An unknown provider in a pin is just as unknown; neither reached the simulator.
    assert_error(post_chat(gw, chat_body("nobody/model-x")), 404, "invalid_request_error", "model_not_found")
    assert_error(
        post_chat(gw, chat_body(f"{alpha}/model-zzz")), 404, "invalid_request_error", "model_not_found"
    )
    assert upstream(sim_control, alpha) == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-key"},
        {"Authorization": f"Basic {CLIENT_KEY}"},
        {"Authorization": "Bearer"},
        {"x-api-key": "wrong-key"},
        {"x-goog-api-key": "wrong-key"},
        {"Authorization": f"Bearer {CLIENT_KEY}x"},
    ],
    ids=["none", "wrong-bearer", "basic-scheme", "empty-bearer", "wrong-x-api-key", "wrong-goog", "longer"],
)
def test_missing_or_wrong_key_is_401(make_gateway: MakeGateway, headers: dict[str, str]) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]})
    resp = post_chat(gw, chat_body(), headers=headers, auth=False)
    assert_error(resp, 401, "authentication_error")
    # A bad key is refused before the body is even looked at.
    assert_error(post_chat(gw, content=b"{nope", headers=headers, auth=False), 401, "authentication_error")


def test_wrong_key_raises_authentication_error_in_sdk(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]})
    with pytest.raises(openai.AuthenticationError) as info:
        sdk(gw, key="sk-not-the-key").chat.completions.create(model="auto", messages=HELLO)  # type: ignore[arg-type]
    assert info.value.status_code == 401


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {CLIENT_KEY}"},
        {"Authorization": f"bearer {CLIENT_KEY}"},
        {"x-api-key": CLIENT_KEY},
        {"x-goog-api-key": CLIENT_KEY},
    ],
    ids=["bearer", "bearer-lowercase", "x-api-key", "x-goog-api-key"],
)
def test_right_key_is_accepted_in_every_header(
    make_gateway: MakeGateway, sim_control: SimControl, headers: dict[str, str]
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]})
    resp = post_chat(gw, chat_body(), headers=headers, auth=False)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == f"Hello from {alpha}/model-x."
    assert resp.headers["X-Routed-Via"] == f"{alpha}/model-x"
    # The client's key is never forwarded upstream: the provider's own key is.
    (call,) = upstream(sim_control, alpha)
    assert call["key"] == f"{alpha}-key-1"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"model": "auto", "messages": [', "Malformed JSON"),
        (b"not json at all", "Malformed JSON"),
        (b"", "empty"),
        (b"[1, 2, 3]", "JSON object"),
        (b'"a string"', "JSON object"),
        (b"null", "JSON object"),
        (b"42", "JSON object"),
        (b"\xff\xfe{}", "Malformed JSON"),
        (b"[" * 2000 + b"]" * 2000, "Malformed JSON"),
        (b'{"model": "auto", "temperature": 1e999, "messages": []}', "Malformed JSON"),
        (
            b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}], "metadata": '
            + b"[" * 300
            + b"]" * 300
            + b"}",
            "nested too deeply",
        ),
    ],
    ids=[
        "truncated",
        "garbage",
        "empty",
        "array",
        "string",
        "null",
        "number",
        "not-utf8",
        "too-deep",
        "infinite",
        "deep-extra",
    ],
)
def test_unparseable_or_non_object_body_is_400(
    make_gateway: MakeGateway, sim_control: SimControl, content: bytes, fragment: str
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]})
    err = assert_error(post_chat(gw, content=content), 400, "invalid_request_error")
    assert fragment in err["message"]
    assert upstream(sim_control, alpha) == []


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (chat_body(temperature=2.5), "temperature"),
        (chat_body(temperature=-0.1), "temperature"),
        (chat_body(top_p=1.5), "top_p"),
        ({"model": "auto", "messages": [{"role": "user"}]}, "messages.0.content"),
        ({"model": "auto", "messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
        ({"model": "auto", "messages": [HELLO[0], {"role": "wizard", "content": "x"}]}, "messages.1.role"),
        ({"model": "auto", "messages": []}, "messages"),
        ({"model": "auto"}, "messages"),
        (chat_body(stop=[1, 2]), "stop"),
    ],
    ids=[
        "temp-high",
        "temp-neg",
        "top_p",
        "no-content",
        "bad-content",
        "bad-role",
        "no-messages",
        "missing",
        "stop",
    ],
)
def test_schema_violation_is_400_naming_the_path(
    make_gateway: MakeGateway, sim_control: SimControl, body: dict[str, Any], path: str
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]})
    err = assert_error(post_chat(gw, body), 400, "invalid_request_error")
    assert err["message"].startswith("Invalid request: "), err
    assert f"{path}:" in err["message"], err
    assert upstream(sim_control, alpha) == []

    if "messages" in body:  # the SDK itself refuses to send a request without messages
        with pytest.raises(openai.BadRequestError) as info:
            sdk(gw).chat.completions.create(**body)
        assert info.value.status_code == 400


def test_body_over_the_limit_is_413_request_too_large(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, extra={"server": {"body_limit_mb": 0.01}})  # ~10 KB
    big = chat_body(messages=[{"role": "user", "content": "x" * 20_000}])
    err = assert_error(post_chat(gw, big), 413, "invalid_request_error", "request_too_large")
    assert "too large" in err["message"].lower()
    # Just under the limit still works.
    ok = post_chat(gw, chat_body(messages=[{"role": "user", "content": "x" * 5_000}]))
    assert ok.status_code == 200, ok.text
    assert len(upstream(sim_control, alpha)) == 1


def test_error_responses_carry_request_id_and_never_500(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]}, extra={"server": {"body_limit_mb": 0.01}})
    cases: list[tuple[dict[str, Any], int]] = [
        ({"content": b"{"}, 400),
        ({"content": b""}, 400),
        ({"content": b"[]"}, 400),
        ({"body": chat_body(temperature=9)}, 400),
        ({"body": chat_body("missing-model")}, 404),
        ({"body": chat_body(), "auth": False}, 401),
        (
            {"content": b'{"model":"auto","messages":[{"role":"user","content":"' + b"y" * 20_000 + b'"}]}'},
            413,
        ),
    ]
    for n, (kwargs, status) in enumerate(cases):
        sent = f"req-errors-{n}"
        resp = post_chat(gw, headers={"X-Request-ID": sent}, **kwargs)
        assert resp.status_code == status, (n, resp.text)
        assert resp.headers["X-Request-ID"] == sent
        fresh = post_chat(gw, **kwargs)
        assert fresh.status_code == status
        generated = fresh.headers["X-Request-ID"]
        assert generated and generated != sent
    # An unprintable or oversized id is replaced, not echoed.
    resp = post_chat(gw, chat_body("missing-model"), headers={"X-Request-ID": "z" * 300})
    assert resp.status_code == 404
    assert resp.headers["X-Request-ID"] != "z" * 300


# ── The exhaustion ladder ───────────────────────────────────────────────────────────────────────────


def test_every_route_rate_limited_is_429_with_retry_after(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    # The simulator is on loopback, where a failure cools down for cooldown_local_s (5 s by default):
    # long enough here that the second request below surely finds both keys still cooling.
    gw, alpha, beta = two_routes(make_gateway, extra={"fallback": {"cooldown_local_s": 60}})
    for p in (alpha, beta):
        sim_control.script(p, {"status": 429, "retry_after": 30, "error_message": "slow down"}, times=None)
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 429, "rate_limit_error", "rate_limit_exceeded")
    assert isinstance(err["retryAtMs"], int) and err["retryAtMs"] > 0
    retry_after = int(resp.headers["Retry-After"])
    assert 1 <= retry_after <= 120
    assert resp.headers["X-Fallback-Attempts"] == "2"
    assert (
        resp.headers["X-Fallback-Trail"]
        == f"{alpha}/model-x key1=rate_limited; {beta}/model-x key2=rate_limited"
    )
    assert len(upstream(sim_control, alpha)) == len(upstream(sim_control, beta)) == 1

    # Both keys now cool down: the next request is refused without touching the simulator.
    again = post_chat(gw, chat_body())
    err2 = assert_error(again, 429, "rate_limit_error", "rate_limit_exceeded")
    assert "retryAtMs" in err2 and int(again.headers["Retry-After"]) >= 1
    assert "X-Fallback-Attempts" not in again.headers
    assert len(upstream(sim_control, alpha)) == len(upstream(sim_control, beta)) == 1

    with pytest.raises(openai.RateLimitError):
        sdk(gw).chat.completions.create(model="auto", messages=HELLO)  # type: ignore[arg-type]


def test_every_route_unauthorized_is_502_provider_authentication_failed(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, alpha, beta = two_routes(make_gateway)
    for p in (alpha, beta):
        sim_control.script(p, {"status": 401, "error_message": "invalid api key"}, times=None)
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 502, "provider_error", "provider_authentication_failed")
    assert "Attempt trail" in err["message"]
    assert resp.headers["X-Fallback-Attempts"] == "2"
    assert resp.headers["X-Fallback-Trail"] == f"{alpha}/model-x key1=auth; {beta}/model-x key2=auth"
    # The upstream keys never leak into the client's error.
    assert f"{alpha}-key-1" not in resp.text and f"{beta}-key-1" not in resp.text


def test_every_route_rejecting_the_request_is_400_provider_rejected_request(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, alpha, beta = two_routes(make_gateway)
    for p in (alpha, beta):
        sim_control.script(p, {"status": 400, "error_message": "unsupported parameter foo"}, times=None)
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 400, "invalid_request_error", "provider_rejected_request")
    assert "unsupported parameter foo" in err["message"]
    assert resp.headers["X-Fallback-Attempts"] == "2"
    assert "provider_bad_request" in resp.headers["X-Fallback-Trail"]


def test_every_route_failing_is_502_upstream_failed_with_the_trail(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha, beta, gamma = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway({alpha: ["model-x"], beta: ["model-x"], gamma: ["model-y"]})
    for p in (alpha, beta, gamma):
        sim_control.script(p, {"status": 500, "error_message": "upstream exploded"}, times=None)
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 502, "provider_error", "upstream_failed")
    assert resp.headers["X-Fallback-Attempts"] == "3"
    assert resp.headers["X-Fallback-Trail"] == (
        f"{alpha}/model-x key1=upstream_error; {beta}/model-x key2=upstream_error; "
        f"{gamma}/model-y key3=upstream_error"
    )
    assert f"{alpha}/model-x key1: upstream_error" in err["message"]
    assert "upstream exploded" in err["message"]
    assert "Retry-After" not in resp.headers
    for p in (alpha, beta, gamma):
        assert len(upstream(sim_control, p)) == 1

    with pytest.raises(openai.APIStatusError) as info:
        sdk(gw).chat.completions.create(model="auto", messages=HELLO)  # type: ignore[arg-type]
    assert info.value.status_code in (502, 429)  # 429 only if every key is now cooling down


def test_stream_request_exhausted_before_commit_gets_a_json_error(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, alpha, beta = two_routes(make_gateway)
    for p in (alpha, beta):
        sim_control.script(p, {"status": 500}, times=None)
    resp = post_chat(gw, chat_body(stream=True))
    assert_error(resp, 502, "provider_error", "upstream_failed")
    assert resp.headers["X-Fallback-Attempts"] == "2"


LADDER = {
    # name: (alpha's scenario, beta's scenario, extra settings, status, type, code, trail classes)
    "model-not-found": (
        {"status": 404, "error_message": "model not found"},
        {"status": 404, "error_message": "model not found"},
        {},
        404,
        "invalid_request_error",
        "model_not_found",
        ["model_not_found", "model_not_found"],
    ),
    "context-too-large": (
        {"status": 400, "error_message": "maximum context length exceeded"},
        {"status": 413, "error_message": "request too large"},
        {},
        413,
        "invalid_request_error",
        "context_length_exceeded",
        ["context_too_large", "context_too_large"],
    ),
    "degraded-last": (
        {"status": 500},
        {"status": 503, "error_message": "the model deployment is degraded"},
        {},
        503,
        "service_unavailable",
        "provider_degraded",
        ["upstream_error", "upstream_error"],
    ),
    "credits-and-forbidden": (
        {"status": 402, "error_message": "insufficient credits"},
        {"status": 403, "error_message": "no access to this model"},
        {},
        429,
        "rate_limit_error",
        "rate_limit_exceeded",
        ["out_of_credits", "forbidden"],
    ),
    "rate-limited-then-broken": (
        {"status": 429},
        {"status": 500},
        {},
        502,
        "provider_error",
        "upstream_failed",
        ["rate_limited", "upstream_error"],
    ),
    "breaker": (
        {"status": 500},
        {"status": 500},
        {"fallback": {"max_consecutive_upstream_fails": 1}},
        503,
        "service_unavailable",
        "upstream_unhealthy",
        ["upstream_error"],
    ),
}


@pytest.mark.parametrize("case", list(LADDER))
def test_exhaustion_ladder_rows(make_gateway: MakeGateway, sim_control: SimControl, case: str) -> None:
    first, second, extra, status, type_, code, classes = LADDER[case]
    gw, alpha, beta = two_routes(make_gateway, extra=extra)
    sim_control.script(alpha, first, times=None)
    sim_control.script(beta, second, times=None)
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, status, type_, code)
    assert ("retryAtMs" in err) == (status == 429)
    assert ("Retry-After" in resp.headers) == (status == 429)
    assert resp.headers["X-Fallback-Attempts"] == str(len(classes))
    expected = [
        f"{p}/model-x key{n}={c}" for n, (p, c) in enumerate(zip((alpha, beta), classes, strict=False), 1)
    ]
    assert resp.headers["X-Fallback-Trail"] == "; ".join(expected)


def test_fatal_upstream_error_stops_without_failover(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, alpha, beta = two_routes(make_gateway)
    sim_control.script(alpha, {"status": 418, "error_message": "I am a teapot"}, times=1)
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 502, "provider_error", "provider_error")
    assert err["message"].startswith(f"Provider error ({alpha}): ")
    assert "I am a teapot" in err["message"]
    assert resp.headers["X-Fallback-Attempts"] == "1"
    assert upstream(sim_control, beta) == []


def test_provider_without_keys_is_503_no_providers_configured(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, keys={alpha: []})
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 503, "service_unavailable", "no_providers_configured")
    assert "key" in err["message"].lower()
    assert "X-Fallback-Attempts" not in resp.headers
    # Pinned and grouped requests are the same 503, not a 404: the model exists, it has no key.
    assert_error(post_chat(gw, chat_body("model-x")), 503, "service_unavailable", "no_providers_configured")
    assert_error(
        post_chat(gw, chat_body(f"{alpha}/model-x")), 503, "service_unavailable", "no_providers_configured"
    )
    assert upstream(sim_control, alpha) == []


def test_context_window_too_small_everywhere_is_413(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    gw = make_gateway(
        {alpha: ["model-x"], beta: ["model-x"]},
        model_options={f"{alpha}/model-x": {"context_window": 10}, f"{beta}/model-x": {"context_window": 10}},
    )
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 413, "invalid_request_error", "context_length_exceeded")
    assert "2 routes checked" in err["message"]
    assert upstream(sim_control, alpha) == [] and upstream(sim_control, beta) == []


def test_context_window_filters_routes_before_dispatch(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    gw = make_gateway(
        {alpha: ["model-x"], beta: ["model-x"]}, model_options={f"{alpha}/model-x": {"context_window": 10}}
    )
    resp = post_chat(gw, chat_body())
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert "X-Fallback-Attempts" not in resp.headers  # skipped by the router, not a failed hop
    assert upstream(sim_control, alpha) == []


def test_tools_without_a_tool_model_is_422_no_tools_model(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, model_options={f"{alpha}/model-x": {"tools": False}})
    resp = post_chat(gw, chat_body(tools=[WEATHER_TOOL]))
    assert_error(resp, 422, "invalid_request_error", "no_tools_model")
    with pytest.raises(openai.UnprocessableEntityError):
        sdk(gw).chat.completions.create(model="auto", messages=HELLO, tools=[WEATHER_TOOL])  # type: ignore[arg-type,list-item]
    # Without tools the same model serves the request.
    assert post_chat(gw, chat_body()).status_code == 200
    assert len(upstream(sim_control, alpha)) == 1


def test_tools_route_only_to_tool_capable_models(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    gw = make_gateway(
        {alpha: ["model-x"], beta: ["model-x"]}, model_options={f"{alpha}/model-x": {"tools": False}}
    )
    resp = post_chat(gw, chat_body(tools=[WEATHER_TOOL]))
    assert resp.status_code == 200, resp.text
    assert resp.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert upstream(sim_control, alpha) == []


def test_full_rate_window_is_429_without_calling_upstream(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, model_options={f"{alpha}/model-x": {"limits": {"rpm": 1}}})
    assert post_chat(gw, chat_body()).status_code == 200
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 429, "rate_limit_error", "rate_limit_exceeded")
    assert "1 route checked" in err["message"]
    assert len(upstream(sim_control, alpha)) == 1


def test_full_rate_window_429_says_when_to_retry(make_gateway: MakeGateway) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, model_options={f"{alpha}/model-x": {"limits": {"rpm": 1}}})
    assert post_chat(gw, chat_body()).status_code == 200
    resp = post_chat(gw, chat_body())
    err = assert_error(resp, 429, "rate_limit_error", "rate_limit_exceeded")
    assert isinstance(err.get("retryAtMs"), int)
    # The minute window is kept in 1 s buckets, rounded on the safe side: at most 61 s.
    assert 1 <= int(resp.headers["Retry-After"]) <= 61


# ── Pins, groups and the chain ──────────────────────────────────────────────────────────────────────


def three_providers(make_gateway: MakeGateway, **kwargs: Any) -> tuple[GatewayServer, str, str, str]:
    """``alpha`` and ``beta`` serve ``model-x`` (a group); ``gamma`` serves ``model-y``."""
    alpha, beta, gamma = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway({alpha: ["model-x"], beta: ["model-x"], gamma: ["model-y"]}, **kwargs)
    return gw, alpha, beta, gamma


@pytest.mark.parametrize("sep", ["/", ":"])
def test_pin_routes_only_to_that_route(make_gateway: MakeGateway, sim_control: SimControl, sep: str) -> None:
    gw, alpha, beta, gamma = three_providers(make_gateway)
    client = sdk(gw)
    raw = client.chat.completions.with_raw_response.create(model=f"{beta}{sep}model-x", messages=HELLO)  # type: ignore[arg-type]
    assert raw.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert raw.parse().choices[0].message.content == f"Hello from {beta}/model-x."
    assert upstream(sim_control, alpha) == []

    # A failing pin does not fail over anywhere else.
    sim_control.script(beta, {"status": 500}, times=None)
    resp = post_chat(gw, chat_body(f"{beta}{sep}model-x"))
    assert_error(resp, 502, "provider_error", "upstream_failed")
    assert resp.headers["X-Fallback-Attempts"] == "1"
    assert resp.headers["X-Fallback-Trail"] == f"{beta}/model-x key1=upstream_error"
    assert upstream(sim_control, alpha) == [] and upstream(sim_control, gamma) == []


def test_bare_model_id_is_a_group_and_failover_stays_inside(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, alpha, beta, gamma = three_providers(make_gateway)
    sim_control.script(alpha, {"status": 503, "error_message": "overloaded"}, times=None)
    raw = sdk(gw).chat.completions.with_raw_response.create(model="model-x", messages=HELLO)  # type: ignore[arg-type]
    assert raw.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert raw.headers["X-Fallback-Attempts"] == "1"
    assert raw.headers["X-Fallback-Trail"] == f"{alpha}/model-x key1=upstream_error"
    completion = raw.parse()
    assert completion.choices[0].message.content == f"Hello from {beta}/model-x."

    # Both members down: the group is exhausted, gamma (another model) is never tried.
    sim_control.script(beta, {"status": 500}, times=None)
    resp = post_chat(gw, chat_body("MODEL-X"))  # case-insensitive
    assert resp.status_code in (502, 429), resp.text
    assert upstream(sim_control, gamma) == []
    assert {c["model"] for c in upstream(sim_control, alpha) + upstream(sim_control, beta)} == {"model-x"}


def test_auto_follows_the_chain_order(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha, beta, gamma = unique("alpha"), unique("beta"), unique("gamma")
    chain = [f"{gamma}/model-y", f"{beta}/model-x", f"{alpha}/model-x"]
    gw = make_gateway({alpha: ["model-x"], beta: ["model-x"], gamma: ["model-y"]}, chain=chain)
    client = sdk(gw)
    for model in ("auto", "AUTO", "auto:"):
        raw = client.chat.completions.with_raw_response.create(model=model, messages=HELLO)  # type: ignore[arg-type]
        assert raw.headers["X-Routed-Via"] == f"{gamma}/model-y"
    # A request without "model" is auto too.
    assert post_chat(gw, {"messages": HELLO}).headers["X-Routed-Via"] == f"{gamma}/model-y"

    sim_control.script(gamma, {"status": 429}, times=1)
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=HELLO)  # type: ignore[arg-type]
    assert raw.headers["X-Routed-Via"] == f"{beta}/model-x"
    assert raw.headers["X-Fallback-Trail"] == f"{gamma}/model-y key1=rate_limited"
    assert upstream(sim_control, alpha) == []


def test_chain_order_with_a_route_missing_from_the_chain(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    gw = make_gateway({alpha: ["model-x"], beta: ["model-x"]}, chain=[f"{beta}/model-x"])
    sim_control.script(beta, {"status": 500}, times=None)
    resp = post_chat(gw, chat_body())
    assert_error(resp, 502, "provider_error", "upstream_failed")
    assert resp.headers["X-Fallback-Attempts"] == "1"
    assert upstream(sim_control, alpha) == []  # not in the chain: auto never uses it
    # ...but it is still reachable by pin.
    assert post_chat(gw, chat_body(f"{alpha}/model-x")).headers["X-Routed-Via"] == f"{alpha}/model-x"


# ── Per-IP limiter ──────────────────────────────────────────────────────────────────────────────────


def test_per_ip_limiter_429_after_the_limit(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, extra={"server": {"ip_rate_limit_rpm": 2}})
    # The window is fixed (aligned to the minute): if it rolled over mid-sequence, start again.
    for _ in range(3):
        responses = [post_chat(gw, chat_body()) for _ in range(3)]
        if len({r.headers["X-RateLimit-Reset"] for r in responses}) == 1:
            break
    else:  # pragma: no cover - three window roll-overs in a row
        pytest.fail("the limiter window kept rolling over")
    first, second, third = responses
    assert first.status_code == 200 and second.status_code == 200
    assert [r.headers["X-RateLimit-Limit"] for r in responses] == ["2", "2", "2"]
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["1", "0", "0"]
    err = assert_error(third, 429, "rate_limit_error")
    assert 1 <= int(third.headers["Retry-After"]) <= 60
    assert int(third.headers["X-RateLimit-Reset"]) > 0
    # The limiter answers before auth and before the simulator: a bad key is still 429 here.
    assert post_chat(gw, chat_body(), auth=False).status_code == 429
    assert "slow down" in err["message"]
    with pytest.raises(openai.RateLimitError):
        sdk(gw).chat.completions.create(model="auto", messages=HELLO)  # type: ignore[arg-type]
    # /health is outside /v1 and never limited.
    assert httpx.get(f"{gw.base_url}/health").status_code == 200


def test_limiter_off_sends_no_ratelimit_headers(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): ["model-x"]})  # the harness turns the limiter off
    resp = post_chat(gw, chat_body())
    assert resp.status_code == 200
    assert not any(h.lower().startswith("x-ratelimit") for h in resp.headers)


def test_success_headers(make_gateway: MakeGateway) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: ["model-x"]}, extra={"server": {"ip_rate_limit_rpm": 100}})
    resp = post_chat(gw, chat_body(), headers={"X-Request-ID": "abc-123"})
    assert resp.status_code == 200
    assert resp.headers["X-Request-ID"] == "abc-123"
    assert resp.headers["X-Routed-Via"] == f"{alpha}/model-x"
    # Compression and the cache are off by default: neither says anything.
    assert "X-FreeLLM-Compress" not in resp.headers and "X-FreeLLM-Cache" not in resp.headers
    assert resp.headers["X-RateLimit-Limit"] == "100"
    assert "X-Fallback-Attempts" not in resp.headers and "X-Fallback-Trail" not in resp.headers
    body = resp.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_disabled_models_are_never_routed(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha, beta = unique("alpha"), unique("beta")
    gw = make_gateway({alpha: ["model-x"], beta: ["model-x"]}, model_options={f"{alpha}/model-x": {"enabled": False}})
    for model in ("auto", "model-x"):
        resp = post_chat(gw, chat_body(model))
        assert resp.status_code == 200, resp.text
        assert resp.headers["X-Routed-Via"] == f"{beta}/model-x"
    err = assert_error(post_chat(gw, chat_body(f"{alpha}/model-x")), 404, "invalid_request_error", "model_not_found")
    assert "disabled" in err["message"]
    assert upstream(sim_control, alpha) == []
