"""Over the wire: failover on the chat surface before the commit point.

Every test starts a fresh gateway in front of the shared simulator with its own provider names, scripts
the simulator, drives the gateway with the official ``openai`` SDK (or raw HTTP where the SDK would hide
frames) and checks both what the client saw and what the simulator received.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from freellm.sim.control import SimControl
from tests.harness import unique
from tests.integration.helpers import (
    MODEL,
    MakeGateway,
    body,
    directive,
    ended,
    sdk,
    stream_raw,
    two_routes,
    upstream,
)


def assert_failed_over_once(headers: Any, first: str, second: str, error_class: str | None = None) -> None:
    assert headers["x-routed-via"] == f"{second}/{MODEL}"
    assert headers["x-fallback-attempts"] == "1"
    trail = headers["x-fallback-trail"]
    assert trail.startswith(f"{first}/{MODEL} key1=")
    assert ";" not in trail  # exactly one failed hop
    if error_class is not None:
        assert trail == f"{first}/{MODEL} key1={error_class}"


# -- 1. an HTTP error before the commit point ----------------------------------------------------------


def test_stream_500_before_commit_fails_over_and_client_sees_only_second_provider(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500, "error_message": "upstream exploded"})
    sim_control.script(b, {"text": "Answer from the second route.", "chunks": 4})

    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = list(raw.parse())

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Answer from the second route."
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert {c.model for c in chunks} == {MODEL}
    assert_failed_over_once(raw.headers, a, b, "upstream_error")
    assert raw.headers["content-type"].startswith("text/event-stream")

    [first] = ended(sim_control, a)
    [second] = ended(sim_control, b)
    assert first["outcome"] == "error_status" and first["status"] == 500
    assert first["key"] == f"{a}-key-1" and first["stream"] is True
    assert second["outcome"] == "completed"
    assert second["body"]["model"] == MODEL and second["body"]["stream"] is True
    assert second["body"]["messages"] == first["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert "stream_options" not in second["body"]  # forwarded only when the client sent it


def test_non_stream_500_fails_over_to_second_provider(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500})
    sim_control.script(b, {"text": "Non-stream answer."})

    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hi"}]
    )
    completion = raw.parse()

    assert completion.choices[0].message.content == "Non-stream answer."
    assert completion.choices[0].finish_reason == "stop"
    assert_failed_over_once(raw.headers, a, b, "upstream_error")
    [first] = ended(sim_control, a)
    [second] = ended(sim_control, b)
    assert first["stream"] is False and first["status"] == 500
    assert second["stream"] is False and second["outcome"] == "completed"


# -- 2./3. dead turns before any content ----------------------------------------------------------------


def test_inband_error_frame_before_content_fails_over_invisibly(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"inband_error": "model is overloaded", "reasoning": "alpha was thinking"})
    sim_control.script(b, {"text": "Fine answer."})

    out = stream_raw(gw, body())

    assert out.status == 200
    assert out.errors == []
    assert "overloaded" not in "".join(out.data)
    assert out.text == "Fine answer."
    assert out.reasoning == ""
    assert out.done_count == 1 and out.data[-1] == "[DONE]"
    assert_failed_over_once(out.headers, a, b)
    [first] = ended(sim_control, a)
    assert first["outcome"] == "inband_error"
    assert len(upstream(sim_control, b)) == 1

    # The SDK sees a normal stream too (it would raise on an error frame).
    sim_control.script(a, {"inband_error": "model is overloaded"})
    chunks = list(sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == f"Hello from {b}/{MODEL}."


def test_reasoning_then_cut_connection_fails_over_without_leaking_reasoning(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"reasoning": "ALPHA private chain of thought", "cut_after": 0})
    sim_control.script(b, {"reasoning": "beta reasons", "text": "Beta answers."})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert "ALPHA" not in "".join(out.data)
    assert out.reasoning == "beta reasons"
    assert out.text == "Beta answers."
    assert out.done_count == 1
    assert_failed_over_once(out.headers, a, b, "upstream_error")
    [first] = ended(sim_control, a)
    assert first["outcome"] == "cut"


# -- 8. empty completions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario", [{"empty": True}, {"empty": True, "finish_reason": "length"}], ids=["stop", "length"]
)
def test_empty_completion_fails_over_to_next_route(
    make_gateway: MakeGateway, sim_control: SimControl, scenario: dict[str, Any]
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, scenario)
    sim_control.script(b, {"text": "Not empty."})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "Not empty."
    assert [out.chunks[i]["choices"][0]["finish_reason"] for i in out.finish_positions] == ["stop"]
    assert_failed_over_once(out.headers, a, b, "empty_completion")
    [first] = ended(sim_control, a)
    assert first["outcome"] == "completed"


def test_non_stream_empty_completion_fails_over(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"empty": True})
    sim_control.script(b, {"text": "Something."})

    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": "x"}])

    assert raw.parse().choices[0].message.content == "Something."
    assert_failed_over_once(raw.headers, a, b, "empty_completion")


# -- 9. an upstream that just stops -------------------------------------------------------------------------


def test_stream_ending_without_done_or_finish_before_content_fails_over(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"reasoning": "alpha ponders", "text": "", "done": False, "finish_reason": None})
    sim_control.script(b, {"text": "Complete answer."})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "Complete answer."
    assert "alpha ponders" not in "".join(out.data)
    assert_failed_over_once(out.headers, a, b, "upstream_error")
    [first] = ended(sim_control, a)
    assert first["outcome"] == "completed"


# -- 10. silence ---------------------------------------------------------------------------------------------


def test_stall_before_content_fails_over_after_stall_timeout(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra={"stream": {"stall_timeout_s": 0.5}})
    sim_control.script(a, {"stall_after": 0})
    sim_control.script(b, {"text": "After the stall."})

    started = time.monotonic()
    out = stream_raw(gw, body())
    elapsed = time.monotonic() - started

    assert out.status == 200 and out.errors == []
    assert out.text == "After the stall."
    assert_failed_over_once(out.headers, a, b, "timeout")
    assert 0.4 <= elapsed < 5
    [stalled] = upstream(sim_control, a)
    assert sim_control.wait_ended(stalled["id"], timeout=2)["outcome"] == "client_disconnected"


def test_slow_first_byte_fails_over_after_first_byte_timeout(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra={"stream": {"first_byte_timeout_s": 0.5}})
    sim_control.script(a, {"first_byte_delay_ms": 2000})
    sim_control.script(b, {"text": "Quick answer."})

    started = time.monotonic()
    out = stream_raw(gw, body())
    elapsed = time.monotonic() - started

    assert out.status == 200 and out.errors == []
    assert out.text == "Quick answer."
    assert_failed_over_once(out.headers, a, b, "timeout")
    assert elapsed < 1.8  # did not wait for alpha's first byte
    [slow] = upstream(sim_control, a)
    assert sim_control.wait_ended(slow["id"], timeout=3)["outcome"] == "client_disconnected"


# -- 14. concurrency ------------------------------------------------------------------------------------------


def test_64_concurrent_streams_fail_over_without_crossing(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500}, times=None)
    client = sdk(gw, timeout=30)
    n = 64

    def one(i: int) -> tuple[str, str | None]:
        answer = f"stream {i:02d} says " + "abcdefghij"[i % 10] * (i % 7 + 1)
        prompt = f"request {i} " + directive({b: {"text": answer, "chunks": 5}})
        stream = client.chat.completions.create(
            model="auto", messages=[{"role": "user", "content": prompt}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return answer, text or None

    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))

    for answer, text in results:
        assert text == answer
    assert len(upstream(sim_control, b)) == n
    assert 1 <= len(upstream(sim_control, a)) <= n
    assert gw.run(gw.state.store.lease_count()) == 0


# -- 15. rate limits and cooldowns -----------------------------------------------------------------------------


def test_429_with_retry_after_cools_the_key_down_and_next_request_skips_the_route(
    make_gateway: MakeGateway, sim_control: SimControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The simulator listens on loopback, and a local upstream gets a short fixed cooldown that ignores
    # Retry-After; treat it as the remote provider it stands in for.
    monkeypatch.setattr("freellm.routing.catalog.is_local_base_url", lambda url: False)
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 429, "retry_after": 30, "error_message": "Rate limit reached"})
    client = sdk(gw)
    before = time.time()

    first = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "one"}], stream=True
    )
    list(first.parse())
    assert_failed_over_once(first.headers, a, b, "rate_limited")

    cooldowns = gw.run(gw.state.store.active_cooldowns(time.time()))
    alpha_scopes = {scope: rec for scope, rec in cooldowns.items() if scope.startswith(f"{a}\x1f{MODEL}")}
    assert alpha_scopes, cooldowns
    assert all(rec.until >= before + 30 for rec in alpha_scopes.values())  # Retry-After is a floor
    assert not any(scope.startswith(b) for scope in cooldowns)

    second = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "two"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in second.parse() if c.choices)
    assert text == f"Hello from {b}/{MODEL}."
    assert second.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert "x-fallback-attempts" not in second.headers
    assert len(upstream(sim_control, a)) == 1
    assert len(upstream(sim_control, b)) == 2


# -- 16. key rotation and authentication -----------------------------------------------------------------------


def test_401_on_first_key_rotates_to_second_key_of_same_provider(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]}, keys={a: [f"{a}-k1", f"{a}-k2"]})
    sim_control.script(a, {"status": 401, "error_message": "Invalid API key"}, key=f"{a}-k1", times=None)
    sim_control.script(a, {"text": "Served by the second key."}, key=f"{a}-k2")

    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)

    assert text == "Served by the second key."
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert raw.headers["x-fallback-attempts"] == "1"
    assert raw.headers["x-fallback-trail"] == f"{a}/{MODEL} key1=auth"
    assert [(r["key"], r["status"]) for r in upstream(sim_control, a)] == [(f"{a}-k1", 401), (f"{a}-k2", 200)]
    assert upstream(sim_control, b) == []


def test_all_routes_401_is_502_provider_authentication_failed(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]}, keys={a: [f"{a}-k1", f"{a}-k2"]})
    sim_control.script(a, {"status": 401, "error_message": "Invalid API key"}, times=None)
    sim_control.script(b, {"status": 401, "error_message": "Invalid API key"}, times=None)

    with pytest.raises(openai.APIStatusError) as info:
        sdk(gw).chat.completions.create(
            model="auto", messages=[{"role": "user", "content": "hi"}], stream=True
        )

    err = info.value
    assert err.status_code == 502
    envelope = err.response.json()["error"]
    assert envelope["type"] == "provider_error"
    assert envelope["code"] == "provider_authentication_failed"
    assert err.response.headers["x-fallback-attempts"] == "3"
    assert err.response.headers["x-fallback-trail"] == (
        f"{a}/{MODEL} key1=auth; {a}/{MODEL} key2=auth; {b}/{MODEL} key3=auth"
    )
    assert "x-routed-via" not in err.response.headers
    assert sorted(r["key"] for r in upstream(sim_control, a)) == [f"{a}-k1", f"{a}-k2"]
    assert [r["key"] for r in upstream(sim_control, b)] == [f"{b}-key-1"]


# -- more hops, keys and the time budget -----------------------------------------------------------------------


def test_two_failed_hops_are_both_in_the_trail(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b, c = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway({a: [MODEL], b: [MODEL], c: [MODEL]})
    sim_control.script(a, {"status": 503})
    sim_control.script(b, {"inband_error": "overloaded"})
    sim_control.script(c, {"text": "Third time lucky."})

    out = stream_raw(gw, body())

    assert out.text == "Third time lucky." and out.errors == []
    assert out.headers["x-routed-via"] == f"{c}/{MODEL}"
    assert out.headers["x-fallback-attempts"] == "2"
    hops = out.headers["x-fallback-trail"].split("; ")
    assert hops[0] == f"{a}/{MODEL} key1=upstream_error"
    assert hops[1].startswith(f"{b}/{MODEL} key2=")
    assert [len(upstream(sim_control, p)) for p in (a, b, c)] == [1, 1, 1]


def test_5xx_skips_the_other_keys_of_that_provider(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]}, keys={a: [f"{a}-k1", f"{a}-k2", f"{a}-k3"]})
    sim_control.script(a, {"status": 500}, times=None)

    out = stream_raw(gw, body())

    assert out.text == f"Hello from {b}/{MODEL}."
    assert_failed_over_once(out.headers, a, b, "upstream_error")
    assert [r["key"] for r in upstream(sim_control, a)] == [f"{a}-k1"]  # provider-level: no key rotation


def test_429_on_one_key_rotates_to_the_next_key_of_the_same_provider(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway({a: [MODEL], b: [MODEL]}, keys={a: [f"{a}-k1", f"{a}-k2"]})
    sim_control.script(a, {"status": 429, "retry_after": 20}, key=f"{a}-k1", times=None)

    out = stream_raw(gw, body())

    assert out.text == f"Hello from {a}/{MODEL}."
    assert out.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert out.headers["x-fallback-trail"] == f"{a}/{MODEL} key1=rate_limited"
    assert [(r["key"], r["status"]) for r in upstream(sim_control, a)] == [(f"{a}-k1", 429), (f"{a}-k2", 200)]
    assert upstream(sim_control, b) == []


@pytest.mark.parametrize(
    "scenario",
    [{"cut_after": 0}, {"inband_error": "overloaded"}, {"status": 200, "error_body": {"error": {"message": "busy"}}}],
    ids=["cut", "inband-error", "200-with-error-body"],
)
def test_non_stream_dead_answers_fail_over(
    make_gateway: MakeGateway, sim_control: SimControl, scenario: dict[str, Any]
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, scenario)
    sim_control.script(b, {"text": "Whole answer."})

    raw = sdk(gw).chat.completions.with_raw_response.create(model="auto", messages=[{"role": "user", "content": "x"}])

    assert raw.parse().choices[0].message.content == "Whole answer."
    assert_failed_over_once(raw.headers, a, b)


def test_time_budget_hedge_aborts_a_stalled_third_attempt_without_cooling_it_down(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b, c, d = unique("alpha"), unique("beta"), unique("gamma"), unique("delta")
    gw = make_gateway({a: [MODEL], b: [MODEL], c: [MODEL], d: [MODEL]}, extra={"fallback": {"time_budget_s": 1.0}})
    sim_control.script(a, {"status": 500})
    sim_control.script(b, {"status": 500})
    sim_control.script(c, {"stall_after": 0})

    started = time.monotonic()
    out = stream_raw(gw, body())
    elapsed = time.monotonic() - started

    assert 0.8 <= elapsed < 5
    assert out.status == 502
    assert out.json_body["error"]["type"] == "provider_error"
    assert "budget" in out.json_body["error"]["message"]
    assert out.headers["x-fallback-attempts"] == "3"
    assert out.headers["x-fallback-trail"].endswith(f"{c}/{MODEL} key3=timeout")
    [stalled] = upstream(sim_control, c)
    assert sim_control.wait_ended(stalled["id"], timeout=2)["outcome"] == "client_disconnected"
    assert upstream(sim_control, d) == []  # the budget is spent: no fourth attempt
    cooldowns = gw.run(gw.state.store.active_cooldowns(time.time()))
    assert not any(scope.startswith(f"{c}\x1f") for scope in cooldowns)  # a hedge abort is not the provider's fault
    assert gw.run(gw.state.store.lease_count()) == 0


def test_time_budget_abort_is_the_last_error_not_an_earlier_provider_400(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b, c = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway({a: [MODEL], b: [MODEL], c: [MODEL]}, extra={"fallback": {"time_budget_s": 1.0}})
    sim_control.script(a, {"status": 500})
    sim_control.script(b, {"status": 400, "error_message": "unsupported parameter"})
    sim_control.script(c, {"stall_after": 0})

    out = stream_raw(gw, body())

    # The request was not rejected as invalid: the last route timed out. Not a 400.
    assert out.status == 502
    assert out.json_body["error"]["code"] == "upstream_failed"
    assert out.json_body["error"]["message"].endswith("Last error: time budget exhausted")
    assert out.headers["x-fallback-trail"].split("; ")[1:] == [
        f"{b}/{MODEL} key2=provider_bad_request",
        f"{c}/{MODEL} key3=timeout",
    ]


def test_committed_stream_is_never_cut_by_the_time_budget(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b, c = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway({a: [MODEL], b: [MODEL], c: [MODEL]}, extra={"fallback": {"time_budget_s": 0.5}})
    sim_control.script(a, {"status": 500})
    sim_control.script(b, {"status": 500})
    sim_control.script(c, {"text": "slow but steady wins", "chunks": 4, "chunk_delay_ms": 250})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "slow but steady wins"
    assert out.headers["x-routed-via"] == f"{c}/{MODEL}"
    assert out.data[-1] == "[DONE]"


def test_slow_first_byte_within_the_first_byte_timeout_is_not_a_stall(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra={"stream": {"stall_timeout_s": 0.3, "first_byte_timeout_s": 5}})
    sim_control.script(a, {"first_byte_delay_ms": 800, "text": "Worth the wait."})

    out = stream_raw(gw, body())

    assert out.text == "Worth the wait."
    assert out.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert "x-fallback-attempts" not in out.headers
    assert upstream(sim_control, b) == []
