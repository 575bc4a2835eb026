"""Over the wire: conversations that stay on their model — sticky sessions, context handoff and reasoning
memory — with the official SDKs on chat, Messages and Responses against the simulator.

The simulator's request log proves which route each turn reached and what it received.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, unique
from tests.integration.helpers import (
    MODEL,
    MakeGateway,
    anthropic_sdk,
    mixed_gateways,
    received,
    sdk,
    upstream,
)

OPENAI_AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
HANDOFF = {"sessions": {"context_handoff": "on_model_switch"}}


def two(make_gateway: MakeGateway, **extra: Any) -> tuple[GatewayServer, str, str]:
    a, b = unique("alpha"), unique("beta")
    return make_gateway({a: [MODEL], b: [MODEL]}, extra=extra or None), a, b


def chat(gw: GatewayServer, messages: list[dict[str, Any]], headers: dict[str, str] | None = None, **fields: Any) -> httpx.Response:
    payload = {"model": "auto", "messages": messages, **fields}
    resp = httpx.post(f"{gw.v1}/chat/completions", json=payload, headers={**OPENAI_AUTH, **(headers or {})}, timeout=15)
    assert resp.status_code == 200, resp.text
    return resp


def answer(resp: httpx.Response) -> str:
    content: str = resp.json()["choices"][0]["message"]["content"]
    return content


def turn_two(first_user: str, first_answer: str, second_user: str = "And then?") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": first_user},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": second_user},
    ]


# ---- sticky ---------------------------------------------------------------------------------------------


def test_second_turn_stays_on_the_route_that_answered_the_first(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0})
    sim_control.script(a, {"status": 500})  # turn 1 fails over A → B; A is healthy again right after
    client = sdk(gw)
    first = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Plan the refactor."}]
    )
    assert first.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert first.headers["x-freellm-session"] == "new"
    text = first.parse().choices[0].message.content or ""
    second = client.chat.completions.with_raw_response.create(
        model="auto", messages=turn_two("Plan the refactor.", text)  # type: ignore[arg-type]
    )
    assert second.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert second.headers["x-freellm-session"] == "sticky"
    assert len(upstream(sim_control, a)) == 1  # A never saw the second turn
    # A new conversation follows the chain again.
    fresh = chat(gw, [{"role": "user", "content": "Something else entirely."}])
    assert fresh.headers["X-Routed-Via"] == f"{a}/{MODEL}" and fresh.headers["X-FreeLLM-Session"] == "new"


def test_sticky_route_passed_over_while_it_fails(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0})
    sim_control.script(a, {"status": 500})
    first = chat(gw, [{"role": "user", "content": "hello"}])
    assert first.headers["X-Routed-Via"] == f"{b}/{MODEL}"
    sim_control.script(b, {"status": 500})  # the remembered route fails: chain order takes over
    second = chat(gw, turn_two("hello", answer(first)))
    assert second.headers["X-Routed-Via"] == f"{a}/{MODEL}"
    assert second.headers["X-FreeLLM-Session"] == "new"


def test_session_id_header_keys_the_session(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0})
    sid = {"X-Session-Id": "conv-42"}
    sim_control.script(a, {"status": 500})
    first = chat(gw, [{"role": "user", "content": "first words"}], headers=sid)
    assert first.headers["X-Routed-Via"] == f"{b}/{MODEL}"
    # The same session id with a different first user text is still the same conversation…
    same = chat(gw, turn_two("other words", "ok"), headers=sid)
    assert same.headers["X-Routed-Via"] == f"{b}/{MODEL}" and same.headers["X-FreeLLM-Session"] == "sticky"
    # …and without the header the first user text decides (no session remembered for it).
    other = chat(gw, turn_two("other words", "ok"))
    assert other.headers["X-Routed-Via"] == f"{a}/{MODEL}"


@pytest.mark.parametrize("bad", ["x" * 257, "tab\there"])  # control characters: see the unit tests
def test_bad_session_id_is_ignored_never_echoed(make_gateway: MakeGateway, bad: str) -> None:
    gw, _, _ = two(make_gateway)
    resp = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        headers={**OPENAI_AUTH, "X-Session-Id": bad.encode()},  # type: ignore[dict-item]
        timeout=15,
    )
    assert resp.status_code == 200
    assert resp.headers["X-FreeLLM-Session"] == "new"  # keyed by the first user text instead
    assert all(bad not in v for v in resp.headers.values())


def test_two_clients_never_share_a_session(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway(
        {a: [MODEL], b: [MODEL]},
        extra={"auth": {"api_keys": [CLIENT_KEY, "sk-other-user"]}, "fallback": {"cooldown_local_s": 0}},
    )
    sim_control.script(a, {"status": 500})
    first = chat(gw, [{"role": "user", "content": "shared opening"}])
    assert first.headers["X-Routed-Via"] == f"{b}/{MODEL}"
    other = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "messages": turn_two("shared opening", answer(first))},
        headers={"Authorization": "Bearer sk-other-user"},
        timeout=15,
    )
    assert other.headers["X-Routed-Via"] == f"{a}/{MODEL}" and other.headers["X-FreeLLM-Session"] == "new"


def test_a_pin_is_never_overridden(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0}, **HANDOFF)
    sim_control.script(a, {"status": 500})
    first = chat(gw, [{"role": "user", "content": "pin me"}])
    assert first.headers["X-Routed-Via"] == f"{b}/{MODEL}"
    pinned = chat(gw, turn_two("pin me", answer(first)), model=f"{a}/{MODEL}")
    assert pinned.headers["X-Routed-Via"] == f"{a}/{MODEL}"
    sent = received(sim_control, a)[-1]["messages"]
    assert not any("context handoff" in str(m.get("content")) for m in sent)  # never for a pin


def test_messages_and_responses_surfaces_are_sticky_too(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0})
    claude = anthropic_sdk(gw)
    sim_control.script(a, {"status": 500})
    first = claude.messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Claude turn one"}]
    )
    assert first.headers["x-routed-via"] == f"{b}/{MODEL}"
    said = first.parse().content[0].text  # type: ignore[union-attr]
    second = claude.messages.with_raw_response.create(
        model="claude-sonnet-4-5",
        max_tokens=64,
        messages=[
            {"role": "user", "content": "Claude turn one"},
            {"role": "assistant", "content": said},
            {"role": "user", "content": "go on"},
        ],
    )
    assert second.headers["x-routed-via"] == f"{b}/{MODEL}" and second.headers["x-freellm-session"] == "sticky"

    # Responses: the session is derived after the stored chain is expanded.
    client = sdk(gw)
    sim_control.script(a, {"status": 500})
    r1 = client.responses.with_raw_response.create(model="auto", input="Codex turn one")
    assert r1.headers["x-routed-via"] == f"{b}/{MODEL}"
    r2 = client.responses.with_raw_response.create(model="auto", input="continue", previous_response_id=r1.parse().id)
    assert r2.headers["x-routed-via"] == f"{b}/{MODEL}" and r2.headers["x-freellm-session"] == "sticky"
    assert len(upstream(sim_control, a)) == 2  # one failed first turn per surface, nothing else


# ---- context handoff --------------------------------------------------------------------------------------


def handoffs(body: dict[str, Any]) -> list[str]:
    return [
        str(m["content"]) for m in body["messages"] if m["role"] == "system" and "FreeLLM context handoff:" in str(m["content"])
    ]


def test_a_forced_switch_hands_the_context_over_once(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b, c = unique("alpha"), unique("beta"), unique("gamma")
    gw = make_gateway(
        {a: [MODEL], b: [MODEL], c: [MODEL]},
        extra={**HANDOFF, "fallback": {"cooldown_local_s": 0}},
    )
    first = chat(gw, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "The secret word is kumquat."}])
    assert first.headers["X-Routed-Via"] == f"{a}/{MODEL}"
    assert not handoffs(received(sim_control, a)[-1])
    # Turn 2: the remembered route A fails, and so does B: the answer comes from C.
    sim_control.script(a, {"status": 500})
    sim_control.script(b, {"status": 500})
    messages = [
        {"role": "system", "content": "Be brief."},
        *turn_two("The secret word is kumquat.", answer(first), "What was the word?"),
    ]
    second = chat(gw, messages)
    assert second.headers["X-Routed-Via"] == f"{c}/{MODEL}"
    body_b, body_c = received(sim_control, b)[-1], received(sim_control, c)[-1]
    assert not handoffs(received(sim_control, a)[-1])  # A served the session: no switch for A
    [to_b] = handoffs(body_b)
    [to_c] = handoffs(body_c)  # once, although the request switched twice
    assert f"{a}/{MODEL} → {c}/{MODEL}" in to_c and f"{a}/{MODEL} → {b}/{MODEL}" in to_b
    assert "kumquat" in to_c
    roles = [m["role"] for m in body_c["messages"]]
    assert roles[:2] == ["system", "system"] and body_c["messages"][0]["content"] == "Be brief."
    rows = {r.route: r for r in gw.run(gw.state.store.recent_requests(5))}
    assert rows[f"{c}/{MODEL}"].extra["handoff"] == f"{a}/{MODEL} → {c}/{MODEL}"


def test_handoff_is_off_by_default(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0})
    first = chat(gw, [{"role": "user", "content": "remember kumquat"}])
    sim_control.script(a, {"status": 500})
    chat(gw, turn_two("remember kumquat", answer(first)))
    assert not handoffs(received(sim_control, b)[-1])


# ---- reasoning memory -------------------------------------------------------------------------------------


def test_reasoning_comes_back_only_to_the_route_that_produced_it(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two(make_gateway, fallback={"cooldown_local_s": 0})
    sim_control.script(a, {"reasoning": "Think: 6 times 7 is 42.", "text": "42"})
    first = chat(gw, [{"role": "user", "content": "What is 6 times 7?"}])
    assert answer(first) == "42"
    # The client drops reasoning_content, as most do.
    chat(gw, turn_two("What is 6 times 7?", "42", "And 6 times 8?"))
    assistant = [m for m in received(sim_control, a)[-1]["messages"] if m["role"] == "assistant"][-1]
    assert assistant["reasoning_content"] == "Think: 6 times 7 is 42."
    # The same conversation on another route never gets A's reasoning.
    sim_control.script(a, {"status": 500})
    chat(gw, turn_two("What is 6 times 7?", "42", "And 6 times 9?"))
    other = [m for m in received(sim_control, b)[-1]["messages"] if m["role"] == "assistant"][-1]
    assert "reasoning_content" not in other


def test_reasoning_the_client_sent_is_kept_and_other_answers_get_none(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, _ = two(make_gateway)
    sim_control.script(a, {"reasoning": "remembered", "text": "42"})
    chat(gw, [{"role": "user", "content": "q"}])
    mine = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "42", "reasoning_content": "my own"},
        {"role": "user", "content": "next"},
    ]
    chat(gw, mine)
    sent = [m for m in received(sim_control, a)[-1]["messages"] if m["role"] == "assistant"][-1]
    assert sent["reasoning_content"] == "my own"
    # An assistant turn that is not the remembered answer gets nothing.
    chat(gw, turn_two("q", "a different answer", "next"))
    sent = [m for m in received(sim_control, a)[-1]["messages"] if m["role"] == "assistant"][-1]
    assert "reasoning_content" not in sent


def test_signed_reasoning_comes_back_as_a_thinking_block_on_an_anthropic_upstream(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path, sim_control: SimControl
) -> None:
    """A chat client that drops reasoning: turn 2 still reaches the Anthropic-wire route with its own
    signed thinking block first (thinking models reject a tool loop without it)."""
    with mixed_gateways(servers_loop, sim, tmp_path, MODEL) as make:
        a = unique("ant")
        gw = make({a: "anthropic"})
        sim_control.script(a, {"reasoning": "Six sevens are forty-two.", "text": "42", "reasoning_signature": "sig-abc"})
        first = chat(gw, [{"role": "user", "content": "6*7?"}], reasoning_effort="high")
        assert answer(first) == "42"
        chat(gw, turn_two("6*7?", "42", "and 6*8?"), reasoning_effort="high")
        sent = received(sim_control, a)[-1]
    assistant = [m for m in sent["messages"] if m["role"] == "assistant"][-1]
    blocks = assistant["content"]
    assert blocks[0] == {"type": "thinking", "thinking": "Six sevens are forty-two.", "signature": "sig-abc"}
    assert blocks[1]["type"] == "text" and blocks[1]["text"] == "42"
