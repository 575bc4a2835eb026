"""Over the wire: the ``fusion`` virtual model on the chat surface — panel, refill, judge, fallbacks,
budgets, live progress and cancellation — with the openai SDK and raw frames against the simulator.

The simulator answers ``Hello from {provider}/{model}.`` by default, so every member's answer is its
own; the judge's call is the one whose prompt lists the answers (``--- Response 1 ---``), which is what
a script's ``match`` picks out.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2 as httpx
import openai
import pytest

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import AUTH, MODEL, MakeGateway, received, sdk, stream_raw, upstream

JUDGE_CALL = "--- Response 1 ---"


def panel_gateway(
    make_gateway: MakeGateway, n: int = 3, *, fusion: dict[str, Any] | None = None, **kwargs: Any
) -> tuple[GatewayServer, list[str]]:
    names = [unique(f"p{i}") for i in range(n)]
    extra = {"fusion": fusion} if fusion else None
    return make_gateway({name: [MODEL] for name in names}, extra=extra, **kwargs), names


def ask(gw: GatewayServer, **fusion: Any) -> Any:
    """A non-stream fusion request through the openai SDK: (raw response, parsed JSON body)."""
    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="fusion",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        extra_body={"fusion": fusion} if fusion else None,
    )
    return raw, json.loads(raw.text)


def greeting(provider: str) -> str:
    return f"Hello from {provider}/{MODEL}."


def judge_bodies(sim_control: SimControl, provider: str) -> list[dict[str, Any]]:
    return [b for b in received(sim_control, provider) if JUDGE_CALL in json.dumps(b)]


def panel_bodies(sim_control: SimControl, provider: str) -> list[dict[str, Any]]:
    return [b for b in received(sim_control, provider) if JUDGE_CALL not in json.dumps(b)]


# ---- the panel and the judge ----------------------------------------------------------------------------


def test_the_judge_sees_every_answer_and_the_client_gets_the_judges_text(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, (a, b, c) = panel_gateway(make_gateway)
    sim_control.script(a, {"text": "Paris, the synthesis."}, match=JUDGE_CALL)
    raw, body = ask(gw, k=3)
    assert body["model"] == "fusion" and body["id"].startswith("fusion-")
    assert body["choices"][0]["message"]["content"] == "Paris, the synthesis."
    assert body["choices"][0]["finish_reason"] == "stop"
    [judge] = judge_bodies(sim_control, a)  # auto: the first route of the chain judges
    prompt = json.dumps(judge["messages"])
    for p in (a, b, c):
        assert greeting(p) in prompt
    assert "What is the capital of France?" in prompt
    assert "tools" not in judge and judge["stream"] is False
    fusion = body["_fusion"]
    assert fusion["synthesized"] is True and fusion["tool_call_winner"] is None
    assert fusion["judge"] == {"provider": a, "model": MODEL}
    assert [(m["provider"], m["status"]) for m in fusion["panel"]] == [(a, "ok"), (b, "ok"), (c, "ok")]
    assert raw.headers["x-routed-via"] == f"fusion({a}/{MODEL}+{b}/{MODEL}+{c}/{MODEL} -> {a}/{MODEL})"
    # usage sums every call: three members and the judge
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    rows = gw.run(gw.state.store.recent_requests(10))
    calls = [r for r in rows if "fusion_role" in r.extra]
    assert usage["completion_tokens"] == sum(r.tokens_out for r in calls)
    roles = sorted(r.extra.get("fusion_role", "top") for r in rows)
    assert roles == ["judge", "panel", "panel", "panel", "top"]
    top = next(r for r in rows if "fusion" in r.extra)
    assert top.route == raw.headers["x-routed-via"] and top.status == 200
    assert top.tokens_in == usage["prompt_tokens"] and top.tokens_out == usage["completion_tokens"]


def test_a_failing_member_hands_its_slot_to_the_refill_pool(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, (a, b, c, d) = panel_gateway(make_gateway, 4)
    sim_control.script(b, {"status": 500}, times=None)
    _, body = ask(gw, k=2)
    panel = [(m["provider"], m["status"]) for m in body["_fusion"]["panel"]]
    assert panel == [(a, "ok"), (b, "error"), (c, "ok")]
    assert len(panel_bodies(sim_control, c)) == 1 and upstream(sim_control, d) == []
    prompt = json.dumps(judge_bodies(sim_control, a)[0]["messages"])
    assert greeting(c) in prompt and greeting(b) not in prompt


def test_the_panel_never_dispatches_more_than_2k_members(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, names = panel_gateway(make_gateway, 6)
    for name in names:
        sim_control.script(name, {"status": 500}, times=None)
    with pytest.raises(openai.APIStatusError) as info:
        ask(gw, k=2)
    assert info.value.status_code == 502
    called = [name for name in names if upstream(sim_control, name)]
    assert called == names[:4]


def test_every_member_rate_limited_is_a_429_with_retry_after(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, names = panel_gateway(make_gateway, 2)
    for name in names:
        sim_control.script(name, {"status": 429, "retry_after": 30}, times=None)
    resp = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "fusion", "messages": [{"role": "user", "content": "hi"}]},
        headers=AUTH,
    )
    assert resp.status_code == 429
    assert int(resp.headers["retry-after"]) >= 1
    assert resp.json()["error"]["type"] == "rate_limit_error"
    # Every route now cools down: the next fusion request is the same 429 `auto` would give, not a 400.
    again = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "fusion", "messages": [{"role": "user", "content": "hi"}]},
        headers=AUTH,
    )
    assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1
    assert again.json()["error"]["code"] == "rate_limit_exceeded"
    assert len(upstream(sim_control, names[0])) == 1  # nothing was sent the second time


def test_a_failing_judge_falls_back_to_the_longest_answer(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    names = [unique("p0"), unique("p1"), unique("judge")]
    a, b, j = names
    gw = make_gateway({n: [MODEL] for n in names}, extra={"fusion": {"judge": f"{j}/{MODEL}", "panel": [f"{a}/{MODEL}", f"{b}/{MODEL}"]}})
    sim_control.script(b, {"text": "The longest of the two panel answers."})
    sim_control.script(j, {"status": 500}, times=None)
    _, body = ask(gw)
    assert body["choices"][0]["message"]["content"] == "The longest of the two panel answers."
    assert body["_fusion"]["synthesized"] is False and body["_fusion"]["judge"] is None
    assert len(judge_bodies(sim_control, j)) >= 1  # it was asked, and failed


def test_a_tool_call_survivor_wins_without_a_judge(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    names = [unique("p0"), unique("p1"), unique("judge")]
    a, b, j = names
    gw = make_gateway({n: [MODEL] for n in names}, extra={"fusion": {"judge": f"{j}/{MODEL}", "panel": [f"{a}/{MODEL}", f"{b}/{MODEL}"]}})
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]})
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    completion = sdk(gw).chat.completions.create(
        model="fusion", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools  # type: ignore[arg-type]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls and choice.message.tool_calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    assert upstream(sim_control, j) == []
    extra = completion.model_extra or {}
    assert extra["_fusion"]["tool_call_winner"] == {"provider": b, "model": MODEL}


def test_best_of_makes_no_judge_call(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, (a, b, c) = panel_gateway(make_gateway)
    sim_control.script(c, {"text": "A considerably longer answer than the greetings."})
    _, body = ask(gw, strategy="best_of")
    assert body["choices"][0]["message"]["content"] == "A considerably longer answer than the greetings."
    assert body["_fusion"]["synthesized"] is False
    assert all(judge_bodies(sim_control, p) == [] for p in (a, b, c))


def test_expose_panel_lists_each_members_answer(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, (a, b) = panel_gateway(make_gateway, 2)
    sim_control.script(b, {"status": 500}, times=None)
    _, body = ask(gw, expose_panel=True, strategy="best_of")
    members = {m["provider"]: m for m in body["_fusion"]["members"]}
    assert members[a]["content"] == greeting(a) and members[a]["status"] == "ok"
    assert members[b]["status"] == "error" and members[b]["error"]


def test_a_json_answer_survives_a_judge_that_cannot_write_json(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    names = [unique("p0"), unique("p1"), unique("judge")]
    a, b, j = names
    gw = make_gateway({n: [MODEL] for n in names}, extra={"fusion": {"judge": f"{j}/{MODEL}", "panel": [f"{a}/{MODEL}", f"{b}/{MODEL}"]}})
    sim_control.script(a, {"text": '{"city": "Paris"}'})
    sim_control.script(b, {"text": '{"city": "Paris", "country": "France"}'})
    sim_control.script(j, {"text": "Paris is the capital."}, times=None)
    completion = sdk(gw).chat.completions.create(
        model="fusion",
        messages=[{"role": "user", "content": "Capital of France as JSON"}],
        response_format={"type": "json_object"},
    )
    assert json.loads(completion.choices[0].message.content or "") == {"city": "Paris", "country": "France"}
    assert (completion.model_extra or {})["_fusion"]["synthesized"] is False


# ---- budgets ------------------------------------------------------------------------------------------------


def test_members_past_the_panel_timeout_are_cancelled(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, (_, _, c) = panel_gateway(make_gateway, fusion={"panel_timeout_s": 0.5})
    sim_control.script(c, {"first_byte_delay_ms": 10_000})
    started = time.monotonic()
    _, body = ask(gw, k=3)
    assert time.monotonic() - started < 5
    panel = {m["provider"]: m for m in body["_fusion"]["panel"]}
    assert panel[c]["status"] == "dropped" and panel[c]["reason"] == "panel_timeout"
    assert body["_fusion"]["synthesized"] is True
    [slow] = upstream(sim_control, c)
    assert sim_control.wait_ended(slow["id"], timeout=2)["outcome"] == "client_disconnected"
    assert gw.run(gw.state.store.lease_count()) == 0
    assert gw.run(gw.state.store.active_cooldowns(time.time())) == {}


def test_the_cost_budget_stops_dispatching(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, names = panel_gateway(make_gateway, 3, fusion={"max_cost_tokens": 5})
    _, body = ask(gw, k=3)
    called = [n for n in names if upstream(sim_control, n)]
    assert called == names[:1]  # the first call's estimate already reaches the budget
    assert body["_fusion"]["synthesized"] is False
    assert body["choices"][0]["message"]["content"] == greeting(names[0])


# ---- streaming ----------------------------------------------------------------------------------------------


def test_stream_shows_the_panel_then_the_judges_answer(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, (a, b, c) = panel_gateway(make_gateway)
    sim_control.script(a, {"text": "The judged answer.", "chunks": 3}, match=JUDGE_CALL)
    out = stream_raw(gw, {"model": "fusion", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert out.status == 200 and out.errors == [] and out.done_count == 1
    assert out.headers["x-routed-via"] == f"fusion({a}/{MODEL}+{b}/{MODEL}+{c}/{MODEL})"
    chunks = out.chunks
    assert {c_["id"] for c_ in chunks} == {chunks[0]["id"]} and all(c_["model"] == "fusion" for c_ in chunks)
    events = [(i, c_["_fusion"]) for i, c_ in enumerate(chunks) if "_fusion" in c_]
    first_content = next(i for i, c_ in enumerate(chunks) if c_["choices"] and c_["choices"][0]["delta"].get("content"))
    panel = [e for i, e in events if e["event"] == "panel"]
    assert sorted(e["provider"] for e in panel) == sorted([a, b, c]) and all(e["status"] == "ok" for e in panel)
    assert all(i < first_content for i, _ in events)
    assert [e for _, e in events if e["event"] == "judge"] == [{"event": "judge", "provider": a, "model": MODEL}]
    for i, _ in events:
        assert chunks[i]["choices"] == [{"index": 0, "delta": {}, "finish_reason": None}]
    assert out.text == "The judged answer."
    assert out.finish_positions == [len(chunks) - 2]
    [usage_at] = out.usage_positions
    assert usage_at == len(chunks) - 1
    assert chunks[usage_at]["usage"]["completion_tokens"] >= 4  # summed over four calls


def test_the_openai_sdk_assembles_a_fusion_stream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, (a, _, _) = panel_gateway(make_gateway)
    sim_control.script(a, {"text": "Assembled by the SDK."}, match=JUDGE_CALL)
    stream = sdk(gw).chat.completions.create(
        model="fusion", messages=[{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True}
    )
    text = ""
    usage = None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage
    assert text == "Assembled by the SDK."
    assert usage is not None and usage.total_tokens > 0


def test_a_stream_with_no_survivor_ends_in_band(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, names = panel_gateway(make_gateway, 2)
    for name in names:
        sim_control.script(name, {"status": 500}, times=None)
    out = stream_raw(gw, {"model": "fusion", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert out.status == 200
    [error] = out.errors
    assert error["type"] == "stream_error" and "every panel member failed" in error["message"]
    assert out.done_count == 1 and out.text == ""
    assert [c["_fusion"]["status"] for c in out.chunks] == ["error", "error"]
    [top] = [r for r in gw.run(gw.state.store.recent_requests(10)) if "fusion_role" not in r.extra]
    assert top.outcome == "error" and top.status == 502
    assert [m["status"] for m in top.extra["fusion"]["panel"]] == ["error", "error"]


def test_a_judge_dying_mid_stream_keeps_its_text_and_ends_in_band(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, (a, _) = panel_gateway(make_gateway, 2)
    sim_control.script(a, {"text": "partial judged text", "chunks": 4, "cut_after": 2}, match=JUDGE_CALL)
    out = stream_raw(gw, {"model": "fusion", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert out.text and "partial judged text".startswith(out.text)
    [error] = out.errors
    assert error["type"] == "stream_error"
    assert out.done_count == 1


def test_a_client_leaving_during_the_panel_closes_every_member(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, names = panel_gateway(make_gateway, 3)
    for name in names:
        sim_control.script(name, {"first_byte_delay_ms": 20_000})
    with (
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST",
            f"{gw.v1}/chat/completions",
            json={"model": "fusion", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            headers=AUTH,
        ) as resp,
    ):
        assert resp.status_code == 200  # the stream opened at once, before any member answered
        assert resp.headers["x-routed-via"].startswith("fusion(")
        for name in names:
            sim_control.wait_received(name)
    closed_at = time.monotonic()
    for name in names:
        [seen] = upstream(sim_control, name)
        entry = sim_control.wait_ended(seen["id"], timeout=2)
        assert entry["outcome"] == "client_disconnected"
    assert time.monotonic() - closed_at < 1.5
    assert gw.run(gw.state.store.lease_count()) == 0
    assert gw.run(gw.state.store.active_cooldowns(time.time())) == {}


def test_a_client_leaving_a_non_stream_fusion_request_closes_every_member(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, names = panel_gateway(make_gateway, 3)
    for name in names:
        sim_control.script(name, {"first_byte_delay_ms": 20_000})
    with pytest.raises(httpx.TimeoutException):
        httpx.post(
            f"{gw.v1}/chat/completions",
            json={"model": "fusion", "messages": [{"role": "user", "content": "hi"}]},
            headers=AUTH,
            timeout=2.0,
        )
    closed_at = time.time()
    for name in names:
        [seen] = upstream(sim_control, name)  # every member was dispatched before the client left
        entry = sim_control.wait_ended(seen["id"], timeout=2)
        assert entry["outcome"] == "client_disconnected"
        assert entry["ended_at"] - closed_at < 1.0
    assert gw.run(gw.state.store.lease_count()) == 0
    assert gw.run(gw.state.store.active_cooldowns(time.time())) == {}
    rows = gw.run(gw.state.store.recent_requests(10))
    assert {r.outcome for r in rows} == {"canceled"}


# ---- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fusion", "param"),
    [({"k": 0}, "fusion.k"), ({"k": 100}, "fusion.k"), ({"k": "two"}, "fusion.k"), ({"strategy": "vote"}, "fusion.strategy")],
)
def test_bad_fusion_options_are_a_400_before_any_upstream_call(
    make_gateway: MakeGateway, sim_control: SimControl, fusion: dict[str, Any], param: str
) -> None:
    gw, names = panel_gateway(make_gateway, 2)
    with pytest.raises(openai.BadRequestError) as info:
        ask(gw, **fusion)
    err = info.value.body
    assert isinstance(err, dict) and err["param"] == param and param in err["message"]
    assert all(upstream(sim_control, n) == [] for n in names)


def test_only_unknown_members_is_a_400_naming_them(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, names = panel_gateway(make_gateway, 2)
    resp = httpx.post(
        f"{gw.v1}/chat/completions",
        json={
            "model": "fusion",
            "messages": [{"role": "user", "content": "hi"}],
            "fusion": {"models": ["nowhere/none", "ghost-model"]},
        },
        headers={"Authorization": f"Bearer {CLIENT_KEY}"},
    )
    assert resp.status_code == 400
    message = resp.json()["error"]["message"]
    assert "nowhere/none (unknown)" in message and "ghost-model (unknown)" in message
    assert all(upstream(sim_control, n) == [] for n in names)


def test_fusion_is_listed_and_can_be_turned_off(make_gateway: MakeGateway) -> None:
    gw, _ = panel_gateway(make_gateway, 1)
    ids = [m.id for m in sdk(gw).models.list()]
    assert "fusion" in ids
    off, _ = panel_gateway(make_gateway, 1, fusion={"enabled": False})
    assert "fusion" not in [m.id for m in sdk(off).models.list()]
    with pytest.raises(openai.NotFoundError):
        ask(off)
