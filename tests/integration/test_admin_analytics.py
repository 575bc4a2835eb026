"""Over the wire: ``GET /admin/requests`` and ``GET /admin/analytics`` on a real gateway and simulator.

The test drives known traffic and checks every number against what it computes itself from what it sent:
token counts from the simulator's documented usage rule (prompt = message characters // 4, completion =
answer characters // 4, each at least 1), counts and rates from the requests it made, percentiles
(nearest rank, recomputed here) from the latencies the request listing reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim.control import SimControl
from tests.harness import GatewayServer, unique
from tests.integration.helpers import AUTH, MODEL, MakeGateway, stream_raw

ADMIN_KEY = "sk-admin-analytics"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ADMIN_ON = {"auth": {"admin_keys": [ADMIN_KEY]}}
ROW_FIELDS = {
    "id", "time", "surface", "route", "status", "attempts", "latency_ms", "ttft_ms", "tokens_in", "tokens_out",
    "error_class", "cached",
}


def usage(prompt: str, answer: str) -> tuple[int, int]:
    """The simulator's usage rule for one user message and its answer."""
    return max(1, len(prompt) // 4), max(1, len(answer) // 4)


def nearest_rank(values: list[int], percent: int) -> int:
    ordered = sorted(values)
    return ordered[math.ceil(percent * len(ordered) / 100) - 1]


def chat(gw: GatewayServer, model: str, text: str, request_id: str, **fields: Any) -> httpx.Response:
    payload = {"model": model, "messages": [{"role": "user", "content": text}], **fields}
    return httpx.post(
        f"{gw.v1}/chat/completions", json=payload, headers={**AUTH, "X-Request-ID": request_id}, timeout=15
    )


def admin_get(gw: GatewayServer, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{gw.base_url}{path}", headers=ADMIN if headers is None else headers, timeout=15)


def rows(gw: GatewayServer, query: str = "") -> list[dict[str, Any]]:
    resp = admin_get(gw, f"/admin/requests{query}")
    assert resp.status_code == 200, resp.text
    data: list[dict[str, Any]] = resp.json()["data"]
    return data


def ids(gw: GatewayServer, query: str = "") -> list[str]:
    return [r["id"] for r in rows(gw, query)]


@dataclass
class Traffic:
    gw: GatewayServer
    a: str
    b: str
    c: str
    tokens: dict[str, tuple[int, int]]
    """request id → (prompt, completion) tokens the simulator billed."""
    status_c: int


@pytest.fixture
def traffic(make_gateway: MakeGateway, sim_control: SimControl) -> Traffic:
    """Six requests, in this order:

    ``a1`` pinned to A (answers); ``b1`` pinned to B (answers, stored in the cache); ``c1`` pinned to C,
    which answers 500 (nobody answers: a 502); ``f1`` to ``auto`` (chain A, B) with A scripted to 500 —
    B answers after one failed attempt; ``s1`` a stream pinned to B with a 40 ms first byte; ``h1`` the
    same request as ``b1``: a cache hit.
    """
    a, b, c = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway(
        {a: [MODEL], b: [MODEL], c: [MODEL]},
        chain=[f"{a}/{MODEL}", f"{b}/{MODEL}"],
        extra={**ADMIN_ON, "cache": {"enabled": True}},
    )
    tokens: dict[str, tuple[int, int]] = {}

    def answered(rid: str, resp: httpx.Response, prompt: str, answer: str, via: str) -> None:
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-routed-via"] == via
        body = resp.json()
        assert body["choices"][0]["message"]["content"] == answer
        tokens[rid] = usage(prompt, answer)
        assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]) == tokens[rid]

    sim_control.script(a, {"text": "First answer, from route A."})
    answered("a1", chat(gw, f"{a}/{MODEL}", "Question one for A", "a1"), "Question one for A",
             "First answer, from route A.", f"{a}/{MODEL}")
    sim_control.script(b, {"text": "An answer from B that the cache keeps."})
    answered("b1", chat(gw, f"{b}/{MODEL}", "Question two, for B", "b1"), "Question two, for B",
             "An answer from B that the cache keeps.", f"{b}/{MODEL}")
    sim_control.script(c, {"status": 500})
    c1 = chat(gw, f"{c}/{MODEL}", "Question three", "c1")
    assert c1.status_code >= 500 and c1.headers["x-fallback-attempts"] == "1"
    sim_control.script(a, {"status": 500})
    sim_control.script(b, {"text": "B, after A failed."})
    f1 = chat(gw, "auto", "Question four, failing over", "f1")
    answered("f1", f1, "Question four, failing over", "B, after A failed.", f"{b}/{MODEL}")
    assert f1.headers["x-fallback-attempts"] == "1"
    sim_control.script(b, {"text": "A streamed answer from B.", "chunks": 3, "first_byte_delay_ms": 40})
    s1 = stream_raw(
        gw,
        {"model": f"{b}/{MODEL}", "stream": True, "messages": [{"role": "user", "content": "Question five, streamed"}]},
        headers={"X-Request-ID": "s1"},
    )
    assert s1.status == 200 and s1.text == "A streamed answer from B."
    tokens["s1"] = usage("Question five, streamed", "A streamed answer from B.")
    [usage_frame] = [f["usage"] for f in s1.chunks if f.get("usage")]
    assert (usage_frame["prompt_tokens"], usage_frame["completion_tokens"]) == tokens["s1"]
    h1 = chat(gw, f"{b}/{MODEL}", "Question two, for B", "h1")
    assert h1.status_code == 200 and h1.headers["x-freellm-cache"] == "HIT"
    assert h1.headers["x-routed-via"] == "cache"
    return Traffic(gw=gw, a=f"{a}/{MODEL}", b=f"{b}/{MODEL}", c=f"{c}/{MODEL}", tokens=tokens, status_c=c1.status_code)


# -- GET /admin/requests ------------------------------------------------------------------------------------


def test_requests_lists_every_row_newest_first_with_its_fields(traffic: Traffic) -> None:
    t = traffic
    listed = rows(t.gw)
    assert [r["id"] for r in listed] == ["h1", "s1", "f1", "c1", "b1", "a1"]
    by_id = {r["id"]: r for r in listed}
    for r in listed:
        assert set(r) == ROW_FIELDS  # no message bodies unless logging.bodies is on
        assert r["surface"] == "chat"
        assert isinstance(r["time"], float)
    assert [r["time"] for r in listed] == sorted((r["time"] for r in listed), reverse=True)
    assert [(by_id[i]["route"], by_id[i]["status"], by_id[i]["attempts"], by_id[i]["cached"]) for i in
            ("a1", "b1", "c1", "f1", "s1", "h1")] == [
        (t.a, 200, 1, False),
        (t.b, 200, 1, False),
        (None, t.status_c, 1, False),
        (t.b, 200, 2, False),
        (t.b, 200, 1, False),
        ("cache", 200, 0, True),
    ]
    for rid, (tokens_in, tokens_out) in t.tokens.items():
        assert (by_id[rid]["tokens_in"], by_id[rid]["tokens_out"]) == (tokens_in, tokens_out), rid
    assert (by_id["c1"]["tokens_in"], by_id["h1"]["tokens_in"], by_id["h1"]["tokens_out"]) == (0, 0, 0)
    assert by_id["c1"]["error_class"] == "upstream_error"
    assert all(by_id[i]["error_class"] is None for i in ("a1", "b1", "f1", "s1", "h1"))
    assert by_id["s1"]["ttft_ms"] >= 40  # the scripted first byte
    assert by_id["s1"]["latency_ms"] >= by_id["s1"]["ttft_ms"]
    assert by_id["h1"]["ttft_ms"] is None and by_id["c1"]["ttft_ms"] is None


def test_requests_filters_and_limits(traffic: Traffic) -> None:
    t = traffic
    gw = t.gw
    assert ids(gw, "?limit=2") == ["h1", "s1"]
    assert ids(gw, "?limit=1000") == ["h1", "s1", "f1", "c1", "b1", "a1"]
    assert ids(gw, "?status=200") == ["h1", "s1", "f1", "b1", "a1"]
    assert ids(gw, "?status=2xx") == ["h1", "s1", "f1", "b1", "a1"]
    assert ids(gw, "?status=5xx") == ids(gw, f"?status={t.status_c}") == ["c1"]
    assert ids(gw, "?status=4xx") == []
    assert ids(gw, "?status=429,5xx") == ["c1"]
    assert ids(gw, f"?route={t.b}") == ["s1", "f1", "b1"]
    assert ids(gw, f"?route={t.b}&limit=1") == ["s1"]
    assert ids(gw, f"?route={t.b}&status=5xx") == []
    assert ids(gw, "?route=cache") == ["h1"]
    assert ids(gw, f"?route={t.b.split('/')[0]}") == []  # exact, not a prefix
    by_id = {r["id"]: r for r in rows(gw)}
    assert ids(gw, f"?since={by_id['f1']['time']!r}") == ["h1", "s1", "f1"]  # inclusive
    assert ids(gw, f"?since={by_id['f1']['time']!r}&route={t.b}&status=200") == ["s1", "f1"]
    assert ids(gw, f"?since={by_id['h1']['time'] + 1}") == []


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("limit=-5", "limit"),
        ("status=abc", "status"),
        ("status=600", "status"),
        ("status=2xx,", "status"),
        ("status=6xx", "status"),
        ("since=yesterday", "since"),
        ("since=-1", "since"),
        ("since=nan", "since"),
        ("route=", "route"),
    ],
)
def test_requests_bad_parameters_are_400_naming_the_parameter(
    make_gateway: MakeGateway, query: str, param: str
) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]}, extra=ADMIN_ON)
    resp = admin_get(gw, f"/admin/requests?{query}")
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert param in error["message"]


# -- GET /admin/analytics -----------------------------------------------------------------------------------


def test_analytics_numbers_match_the_traffic(traffic: Traffic) -> None:
    t = traffic
    listed = {r["id"]: r for r in rows(t.gw)}
    latency = {rid: r["latency_ms"] for rid, r in listed.items()}
    resp = admin_get(t.gw, "/admin/analytics?window=1h")
    assert resp.status_code == 200
    body = resp.json()
    assert set(body) == {"window", "routes", "cache_tokens_saved"} and body["window"] == "1h"
    # The cache hit saved what b1 cost: its prompt and completion tokens.
    assert body["cache_tokens_saved"] == sum(t.tokens["b1"])

    def tokens_of(*rids: str) -> tuple[int, int]:
        return sum(t.tokens[r][0] for r in rids), sum(t.tokens[r][1] for r in rids)

    b_lat = [latency[r] for r in ("b1", "f1", "s1")]
    expected = [
        # B answered b1, f1 (after A's failed attempt) and s1: all successes, one needed a failover.
        {"route": t.b, "requests": 3, "success_rate": 3 / 3, "fallback_rate": 1 / 3,
         "p50_ms": nearest_rank(b_lat, 50), "p95_ms": nearest_rank(b_lat, 95),
         "ttft_p50_ms": listed["s1"]["ttft_ms"], "tokens_in": tokens_of("b1", "f1", "s1")[0],
         "tokens_out": tokens_of("b1", "f1", "s1")[1], "failures": 0},
        # A answered a1 and failed once (f1's first attempt): 1 success of 1 + 1 attempts.
        {"route": t.a, "requests": 1, "success_rate": 1 / 2, "fallback_rate": 0.0,
         "p50_ms": latency["a1"], "p95_ms": latency["a1"], "ttft_p50_ms": None,
         "tokens_in": t.tokens["a1"][0], "tokens_out": t.tokens["a1"][1], "failures": 1},
        {"route": "cache", "requests": 1, "success_rate": 1.0, "fallback_rate": 0.0,
         "p50_ms": latency["h1"], "p95_ms": latency["h1"], "ttft_p50_ms": None,
         "tokens_in": 0, "tokens_out": 0, "failures": 0},
        # C never answered: c1's only attempt failed.
        {"route": t.c, "requests": 0, "success_rate": 0.0, "fallback_rate": None,
         "p50_ms": None, "p95_ms": None, "ttft_p50_ms": None, "tokens_in": 0, "tokens_out": 0, "failures": 1},
    ]
    assert body["routes"] == expected
    assert listed["s1"]["ttft_ms"] >= 40
    for window in ("24h", "7d", "30d"):  # every row is recent: the longer windows agree
        longer = admin_get(t.gw, f"/admin/analytics?window={window}").json()
        assert longer == {**body, "window": window}


def test_analytics_default_and_unknown_windows(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]}, extra=ADMIN_ON)
    assert admin_get(gw, "/admin/analytics").json() == {"window": "24h", "routes": [], "cache_tokens_saved": 0}
    for bad in ("2h", "1d", "", "30D0"):
        resp = admin_get(gw, f"/admin/analytics?window={bad}")
        assert resp.status_code == 400, bad
        assert resp.json()["error"]["param"] == "window"


# -- who may ask ----------------------------------------------------------------------------------------


def test_admin_key_required(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]}, extra=ADMIN_ON)
    for path in ("/admin/requests", "/admin/analytics"):
        for headers in ({}, {"Authorization": "Bearer wrong"}, AUTH, {"x-api-key": AUTH["Authorization"][7:]}):
            resp = admin_get(gw, path, headers)
            assert resp.status_code == 401, (path, headers)
            assert resp.json()["error"]["code"] == "invalid_admin_key"
        assert admin_get(gw, path, {"x-api-key": ADMIN_KEY}).status_code == 200


def test_routes_do_not_exist_without_admin_keys(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    for path in ("/admin/requests", "/admin/analytics?window=1h"):
        for headers in ({}, AUTH, ADMIN):
            assert admin_get(gw, path, headers).status_code == 404, (path, headers)


# -- message bodies -------------------------------------------------------------------------------------


def test_bodies_are_never_stored_by_default(traffic: Traffic) -> None:
    gw = traffic.gw
    assert all("request" not in r and "response" not in r for r in rows(gw))
    stored = gw.run(gw.state.store.recent_requests(100))
    assert len(stored) == 6
    for row in stored:
        assert "bodies" not in row.extra
        text = repr(row.extra)
        assert "Question" not in text and "answer" not in text.lower()


def test_bodies_with_logging_bodies_on(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a = unique("alpha")
    gw = make_gateway({a: [MODEL]}, extra={**ADMIN_ON, "logging": {"bodies": True}})
    sim_control.script(a, {"text": "A short answer."})
    earlier = {"role": "user", "content": "an earlier question"}
    resp = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "messages": [
            earlier, {"role": "assistant", "content": "an earlier answer"},
            {"role": "user", "content": [{"type": "text", "text": "What is"}, {"type": "text", "text": "this?"}]},
        ]},
        headers={**AUTH, "X-Request-ID": "short"},
        timeout=15,
    )
    assert resp.status_code == 200
    long_question = "é" * 3000  # 6000 bytes of UTF-8
    long_answer = "ab€" * 1000  # 5000 bytes
    sim_control.script(a, {"text": long_answer, "chunks": 5})
    out = stream_raw(
        gw, {"model": "auto", "stream": True, "messages": [{"role": "user", "content": long_question}]},
        headers={"X-Request-ID": "long"},
    )
    assert out.status == 200 and out.text == long_answer
    sim_control.script(a, {"status": 500})
    failed = chat(gw, "auto", "Will fail", "failed")
    assert failed.status_code >= 500

    by_id = {r["id"]: r for r in rows(gw)}
    assert (by_id["short"]["request"], by_id["short"]["response"]) == ("What is\nthis?", "A short answer.")
    request, response = by_id["long"]["request"], by_id["long"]["response"]
    # Capped at 4 KiB of UTF-8 each, cut on a character boundary.
    assert len(request.encode()) <= 4096 and long_question.startswith(request) and len(request) == 2048
    assert len(response.encode()) <= 4096 and long_answer.startswith(response) and len(response.encode()) > 4090
    assert (by_id["failed"]["request"], by_id["failed"]["response"]) == ("Will fail", None)
