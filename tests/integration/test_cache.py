"""Over the wire: the response cache on every cached surface, with the official SDKs and raw HTTP.

The simulator's request log proves whether an answer came from upstream; raw HTTP proves a hit is the
first answer's exact bytes (the simulator mints a new completion id on every call, so a second upstream
answer could never be byte-identical).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from google import genai
from google.genai import types

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import MODEL, MakeGateway, anthropic_sdk, directive, sdk, upstream

CACHE_ON = {"cache": {"enabled": True}}
ADMIN_KEY = "sk-admin-test"
OPENAI_AUTH = {"Authorization": f"Bearer {CLIENT_KEY}"}
ANTHROPIC_AUTH = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
GEMINI_AUTH = {"x-goog-api-key": CLIENT_KEY}


def _chat(stream: bool, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    return (
        "/v1/chat/completions",
        {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": text}]},
        OPENAI_AUTH,
    )


def _completions(stream: bool, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    return ("/v1/completions", {"model": "auto", "stream": stream, "prompt": text}, OPENAI_AUTH)


def _messages(stream: bool, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    return (
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": text}]},
        ANTHROPIC_AUTH,
    )


def _gemini(stream: bool, text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return (
        f"/v1beta/models/gemini-2.5-flash:{action}",
        {"contents": [{"role": "user", "parts": [{"text": text}]}]},
        GEMINI_AUTH,
    )


SURFACES = {"chat": _chat, "completions": _completions, "messages": _messages, "gemini": _gemini}


def post(gw: GatewayServer, path: str, payload: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """POST and read the whole answer (returns once the handler finished, the cache store included)."""
    return httpx.post(f"{gw.base_url}{path}", json=payload, headers=headers, timeout=15)


def ask(gw: GatewayServer, surface: str, *, stream: bool, text: str = "Say hello.", headers: dict[str, str] | None = None) -> httpx.Response:
    path, payload, auth = SURFACES[surface](stream, text)
    return post(gw, path, payload, {**auth, **(headers or {})})


def chat(gw: GatewayServer, *, stream: bool = False, headers: dict[str, str] | None = None, **fields: Any) -> httpx.Response:
    payload = {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": "Say hello."}], **fields}
    return post(gw, "/v1/chat/completions", payload, {**OPENAI_AUTH, **(headers or {})})


def cached_gateway(
    make_gateway: MakeGateway, *, fallback: dict[str, Any] | None = None, **cache: Any
) -> tuple[GatewayServer, str]:
    alpha = unique("alpha")
    extra: dict[str, Any] = {"cache": {"enabled": True, **cache}, "auth": {"admin_keys": [ADMIN_KEY]}}
    if fallback:
        extra["fallback"] = fallback
    return make_gateway({alpha: [MODEL]}, extra=extra), alpha


def calls(sim_control: SimControl, provider: str) -> int:
    return len(upstream(sim_control, provider))


def stats(gw: GatewayServer) -> dict[str, Any]:
    resp = httpx.get(f"{gw.base_url}/admin/cache/stats", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert resp.status_code == 200
    body: dict[str, Any] = resp.json()
    return body


# ---- a second identical request: no upstream call, the same bytes -----------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("surface", list(SURFACES))
def test_hit_replays_identical_bytes_without_upstream(
    make_gateway: MakeGateway, sim_control: SimControl, surface: str, stream: bool
) -> None:
    gw, alpha = cached_gateway(make_gateway)
    first = ask(gw, surface, stream=stream)
    assert first.status_code == 200, first.text
    assert first.headers["X-FreeLLM-Cache"] == "MISS"
    assert first.headers["X-Routed-Via"] == f"{alpha}/{MODEL}"
    second = ask(gw, surface, stream=stream)
    assert second.status_code == 200
    assert second.headers["X-FreeLLM-Cache"] == "HIT"
    assert second.headers["X-Routed-Via"] == "cache"
    assert second.content == first.content
    assert second.headers["Content-Type"] == first.headers["Content-Type"]
    assert second.headers["X-Request-ID"] != first.headers["X-Request-ID"]  # a new request, an old answer
    assert calls(sim_control, alpha) == 1
    kind = "stream" if stream else "json"
    assert stats(gw)["entries"] == {"json": 0, "stream": 0, kind: 1}


def test_sdk_clients_read_hits(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """Each official SDK parses a replayed answer exactly like the original."""
    gw, alpha = cached_gateway(make_gateway)
    client = sdk(gw)
    messages = [{"role": "user", "content": "Hello SDK"}]
    first = client.chat.completions.create(model="auto", messages=messages)  # type: ignore[arg-type]
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=messages)  # type: ignore[arg-type]
    assert raw.headers["x-freellm-cache"] == "HIT"
    assert raw.parse().model_dump() == first.model_dump()
    streamed = [c.model_dump() for c in client.chat.completions.create(model="auto", messages=messages, stream=True)]  # type: ignore[arg-type]
    again = [c.model_dump() for c in client.chat.completions.create(model="auto", messages=messages, stream=True)]  # type: ignore[arg-type]
    assert again == streamed and streamed

    claude = anthropic_sdk(gw)
    msg = claude.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    hit = claude.messages.with_raw_response.create(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    )
    assert hit.headers["x-freellm-cache"] == "HIT"
    assert hit.parse().model_dump() == msg.model_dump()
    with claude.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "Yo"}]) as s:
        text1 = s.get_final_text()
    with claude.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "Yo"}]) as s:
        text2 = s.get_final_text()
    assert text1 == text2 and text1

    gem = genai.Client(
        api_key=CLIENT_KEY, http_options=types.HttpOptions(base_url=gw.base_url, api_version="v1", timeout=15_000)
    )
    r1 = gem.models.generate_content(model="gemini-2.5-flash", contents="Hi gemini")
    r2 = gem.models.generate_content(model="gemini-2.5-flash", contents="Hi gemini")
    assert r2.sdk_http_response is not None and r2.sdk_http_response.headers is not None
    assert {k.lower(): v for k, v in r2.sdk_http_response.headers.items()}["x-freellm-cache"] == "HIT"
    assert r1.text == r2.text
    assert calls(sim_control, alpha) == 5  # chat: 2 (json, stream), messages: 2, gemini: 1


def test_surfaces_and_stream_flag_never_share_entries(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway)
    for surface in SURFACES:
        for stream in (False, True):
            assert ask(gw, surface, stream=stream).headers["X-FreeLLM-Cache"] == "MISS"
    assert calls(sim_control, alpha) == 8


def test_gemini_sse_and_json_array_streams_are_separate(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway)
    payload = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    base = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    sse = post(gw, base + "?alt=sse", payload, GEMINI_AUTH)
    array = post(gw, base, payload, GEMINI_AUTH)
    assert (sse.headers["X-FreeLLM-Cache"], array.headers["X-FreeLLM-Cache"]) == ("MISS", "MISS")
    assert post(gw, base, payload, GEMINI_AUTH).content == array.content
    assert calls(sim_control, alpha) == 2


def test_responses_cached_only_when_not_stored(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway)
    for stream in (False, True):
        payload = {"model": "auto", "input": f"Hello {stream}", "store": False, "stream": stream}
        first = post(gw, "/v1/responses", payload, OPENAI_AUTH)
        second = post(gw, "/v1/responses", payload, OPENAI_AUTH)
        assert (first.headers["X-FreeLLM-Cache"], second.headers["X-FreeLLM-Cache"]) == ("MISS", "HIT")
        assert second.content == first.content
    stored = {"model": "auto", "input": "Keep me", "stream": False}
    one = post(gw, "/v1/responses", stored, OPENAI_AUTH)
    two = post(gw, "/v1/responses", stored, OPENAI_AUTH)
    assert one.headers["X-FreeLLM-Cache"] == two.headers["X-FreeLLM-Cache"] == "BYPASS"
    assert one.json()["id"] != two.json()["id"]  # a stored response gets its own id
    assert calls(sim_control, alpha) == 4


# ---- what is never stored ---------------------------------------------------------------------------


NEVER_STORED = {
    "length": {"text": "Truncated answ", "finish_reason": "length"},
    "cut": {"chunks": 4, "cut_after": 2},
    "inband-error": {"chunks": 4, "inband_error": "overloaded", "inband_error_after": 2},
}


# A non-stream cut or in-band error never reaches the client (it fails over, then exhausts: see
# test_failed_turns_are_never_stored); a stream one is committed and ends with an in-band error.
@pytest.mark.parametrize(
    ("case", "stream"), [("length", False), ("length", True), ("cut", True), ("inband-error", True)]
)
def test_incomplete_turns_are_never_stored(
    make_gateway: MakeGateway, sim_control: SimControl, case: str, stream: bool
) -> None:
    # No cooldown after the failed turn: the same key serves the very next request.
    gw, alpha = cached_gateway(make_gateway, fallback={"cooldown_local_s": 0})
    sim_control.script(alpha, NEVER_STORED[case])
    first = chat(gw, stream=stream)
    assert first.status_code == 200
    assert first.headers["X-FreeLLM-Cache"] == "MISS"
    second = chat(gw, stream=stream)  # healthy this time
    assert second.headers["X-FreeLLM-Cache"] == "MISS"  # nothing was stored: asked upstream again
    assert chat(gw, stream=stream).headers["X-FreeLLM-Cache"] == "HIT"  # the healthy answer was
    assert calls(sim_control, alpha) == 2


def test_failed_turns_are_never_stored(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway)
    sim_control.script(alpha, {"status": 500}, times=None)
    assert chat(gw).status_code == 502
    sim_control.reset()
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"


def leave_stream_at(gw: GatewayServer, stop: str) -> None:
    """Stream "Say hello." and close the connection on the first line that starts with ``stop``; then
    wait until the gateway has finished the turn (its handler no longer runs)."""
    with httpx.Client(timeout=15) as client, client.stream(
        "POST",
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "stream": True, "messages": [{"role": "user", "content": "Say hello."}]},
        headers=OPENAI_AUTH,
    ) as resp:
        assert resp.headers["X-FreeLLM-Cache"] == "MISS"
        for line in resp.iter_lines():
            if line.startswith(stop):
                break

    async def turns_done() -> None:
        async with asyncio.timeout(10):
            while gw.state.turns:
                await asyncio.sleep(0.005)

    gw.run(turns_done())


def test_aborted_stream_is_never_stored(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway)
    sim_control.script(alpha, {"chunks": 3, "stall_after": 1})  # the client leaves during the silence
    leave_stream_at(gw, "data: ")  # the first frame: before the terminator
    assert chat(gw, stream=True).headers["X-FreeLLM-Cache"] == "MISS"
    assert calls(sim_control, alpha) == 2


def test_stream_closed_right_after_terminator_is_stored(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, _ = cached_gateway(make_gateway)
    leave_stream_at(gw, "data: [DONE]")
    assert chat(gw, stream=True).headers["X-FreeLLM-Cache"] == "HIT"


def test_a_stream_is_stored_before_its_terminator_reaches_the_client(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """The client can ask again as soon as it has the terminator — while the first response is still
    open — and gets a hit: the entry was written before the terminator (so on a fleet, every replica
    has it; docs/deployment.md)."""
    gw, alpha = cached_gateway(make_gateway)
    with httpx.Client(timeout=15) as client, client.stream(
        "POST",
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "stream": True, "messages": [{"role": "user", "content": "Say hello."}]},
        headers=OPENAI_AUTH,
    ) as first:
        assert first.headers["X-FreeLLM-Cache"] == "MISS"
        lines = first.iter_lines()
        assert any(line == "data: [DONE]" for line in lines)  # stops reading at the terminator
        again = chat(gw, stream=True)
        assert again.headers["X-FreeLLM-Cache"] == "HIT"
        assert "data: [DONE]" in again.text
    assert calls(sim_control, alpha) == 1


def test_stream_over_the_byte_ceiling_is_served_but_not_stored(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway, stream_max_bytes=200)
    sim_control.script(alpha, {"text": "A long answer " * 40, "chunks": 10}, times=2)
    first = chat(gw, stream=True)
    assert first.status_code == 200 and "[DONE]" in first.text and len(first.content) > 200
    assert chat(gw, stream=True).headers["X-FreeLLM-Cache"] == "MISS"
    assert chat(gw, stream=False).headers["X-FreeLLM-Cache"] == "MISS"  # JSON bodies have no ceiling
    assert chat(gw, stream=False).headers["X-FreeLLM-Cache"] == "HIT"
    assert calls(sim_control, alpha) == 3


# ---- eligibility, bypass and key isolation ----------------------------------------------------------


def test_off_by_default_without_header(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: [MODEL]})
    for _ in range(2):
        resp = chat(gw)
        assert resp.status_code == 200 and "X-FreeLLM-Cache" not in resp.headers
    assert calls(sim_control, alpha) == 2
    # A request may turn the cache on for itself.
    on = {"X-FreeLLM-Cache": "force"}
    assert chat(gw, headers=on).headers["X-FreeLLM-Cache"] == "MISS"
    assert chat(gw, headers=on).headers["X-FreeLLM-Cache"] == "HIT"
    assert "X-FreeLLM-Cache" not in chat(gw).headers  # the default is still off
    assert calls(sim_control, alpha) == 4


@pytest.mark.parametrize(
    "headers",
    [{"X-FreeLLM-Cache": "off"}, {"X-FreeLLM-Cache": "BYPASS"}, {"Cache-Control": "no-store"}, {"Cache-Control": "max-age=0, no-cache"}],
)
def test_bypass_neither_serves_nor_stores(make_gateway: MakeGateway, sim_control: SimControl, headers: dict[str, str]) -> None:
    gw, alpha = cached_gateway(make_gateway)
    assert chat(gw, headers=headers).headers["X-FreeLLM-Cache"] == "BYPASS"
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"  # the bypassed answer was not stored
    assert chat(gw, headers=headers).headers["X-FreeLLM-Cache"] == "BYPASS"  # nor served from the cache
    assert calls(sim_control, alpha) == 3


@pytest.mark.parametrize("value", ["maybe", "", "on please", "☃"])
def test_malformed_header_means_the_default(make_gateway: MakeGateway, value: str) -> None:
    gw, _ = cached_gateway(make_gateway)
    headers: dict[str, Any] = {"X-FreeLLM-Cache": value.encode()}  # raw bytes: any octets a client may send
    first = chat(gw, headers=headers)
    assert first.status_code == 200 and first.headers["X-FreeLLM-Cache"] == "MISS"
    assert chat(gw, headers=headers).headers["X-FreeLLM-Cache"] == "HIT"


def test_hot_temperature_is_never_cached(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway)
    for _ in range(2):
        assert chat(gw, temperature=1.5).headers["X-FreeLLM-Cache"] == "BYPASS"
    assert chat(gw, temperature=1.0).headers["X-FreeLLM-Cache"] == "MISS"
    assert chat(gw, temperature=1.0).headers["X-FreeLLM-Cache"] == "HIT"
    assert calls(sim_control, alpha) == 3


KNOBS: list[dict[str, Any]] = [
    {"temperature": 0.2},
    {"top_p": 0.5},
    {"max_tokens": 50},
    {"stop": ["END"]},
    {"n": 1},
    {"seed": 7},
    {"presence_penalty": 0.5},
    {"frequency_penalty": 0.5},
    {"logit_bias": {"42": 1}},
    {"logprobs": True, "top_logprobs": 2},
    {"reasoning_effort": "low"},
    {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"},
    {"response_format": {"type": "json_object"}},
    {"model": f"alpha-x/{MODEL}"},
]


def test_one_knob_apart_never_shares_an_entry(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha = unique("alpha")
    gw = make_gateway({alpha: [MODEL]}, extra={"cache": {"enabled": True}})
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"
    for knob in KNOBS:
        fields = dict(knob)
        if "model" in fields:
            fields["model"] = f"{alpha}/{MODEL}"
        if "response_format" in fields:
            sim_control.script(alpha, {"text": '{"answer": 1}'})
        resp = chat(gw, **fields)
        assert resp.status_code == 200, (knob, resp.text)
        assert resp.headers["X-FreeLLM-Cache"] == "MISS", knob
    assert calls(sim_control, alpha) == 1 + len(KNOBS)


def test_hit_consumes_no_rate_limit(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    alpha = unique("alpha")
    gw = make_gateway(
        {alpha: [MODEL]},
        extra={"cache": {"enabled": True}},
        model_options={f"{alpha}/{MODEL}": {"limits": {"rpm": 1}}},
    )
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"  # takes the one request this minute allows
    for _ in range(3):
        hit = chat(gw)
        assert hit.status_code == 200 and hit.headers["X-FreeLLM-Cache"] == "HIT"
    refused = chat(gw, seed=1)  # anything that needs the route is refused: the window is full
    assert refused.status_code == 429
    assert calls(sim_control, alpha) == 1
    assert gw.run(gw.state.store.lease_count()) == 0


# ---- persistence and admin ----------------------------------------------------------------------------


def test_json_entries_survive_a_restart(
    servers_loop: BackgroundLoop, sim: SimServer, sim_control: SimControl, tmp_path: Path
) -> None:
    alpha = unique("alpha")
    settings = gateway_settings(tmp_path / "data", sim.base_url, {alpha: [MODEL]}, extra=CACHE_ON)
    gw = start_gateway(servers_loop, settings)
    try:
        json_first = chat(gw)
        stream_first = chat(gw, stream=True)
    finally:
        gw.close()
    gw = start_gateway(servers_loop, settings)
    try:
        again = chat(gw)
        assert again.headers["X-FreeLLM-Cache"] == "HIT" and again.content == json_first.content
        assert chat(gw, stream=True).headers["X-FreeLLM-Cache"] == "MISS"  # streams live in memory
        assert stream_first.status_code == 200
    finally:
        gw.close()
    assert calls(sim_control, alpha) == 3


def test_lru_budget_is_shared_by_bodies_and_streams(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway, max_entries=2)
    chat(gw)  # json, oldest
    chat(gw, stream=True)
    chat(gw, seed=3)  # evicts the first
    assert stats(gw)["entries"] == {"json": 1, "stream": 1}
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"
    assert calls(sim_control, alpha) == 4


def test_ttl_expires_entries(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, alpha = cached_gateway(make_gateway, ttl_s=0.001)
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"  # already past its TTL
    assert calls(sim_control, alpha) == 2


def test_admin_stats_and_clear(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, _ = cached_gateway(make_gateway)
    chat(gw)
    chat(gw)
    chat(gw, stream=True)
    body = stats(gw)
    assert body["entries"] == {"json": 1, "stream": 1}
    assert body["hits"] == 1 and body["misses"] == 2
    assert body["tokens_saved"] > 0
    admin = {"x-api-key": ADMIN_KEY}
    cleared = httpx.delete(f"{gw.base_url}/admin/cache", headers=admin)
    assert cleared.status_code == 200 and cleared.json() == {"cleared": 2}
    assert stats(gw)["entries"] == {"json": 0, "stream": 0}
    assert chat(gw).headers["X-FreeLLM-Cache"] == "MISS"


def test_admin_routes_need_an_admin_key(make_gateway: MakeGateway) -> None:
    gw, _ = cached_gateway(make_gateway)
    url = f"{gw.base_url}/admin/cache/stats"
    for headers in ({}, OPENAI_AUTH, {"x-api-key": CLIENT_KEY}, {"Authorization": "Bearer nope"}, {"x-goog-api-key": ADMIN_KEY}):
        resp = httpx.get(url, headers=headers)
        assert resp.status_code == 401, headers
        assert resp.json()["error"]["type"] == "authentication_error"
    assert httpx.delete(f"{gw.base_url}/admin/cache", headers=OPENAI_AUTH).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}).status_code == 200
    # The admin key is not a client key either.
    assert chat(gw, headers={"Authorization": f"Bearer {ADMIN_KEY}"}).status_code == 401


def test_admin_routes_do_not_exist_without_admin_keys(make_gateway: MakeGateway) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]}, extra=CACHE_ON)
    for headers in ({}, OPENAI_AUTH, {"Authorization": f"Bearer {ADMIN_KEY}"}):
        for method, path in (("GET", "/admin/cache/stats"), ("DELETE", "/admin/cache"), ("GET", "/admin/nothing")):
            resp = httpx.request(method, f"{gw.base_url}{path}", headers=headers)
            assert resp.status_code == 404, (method, path, headers)
            assert "error" in resp.json()


def test_hit_is_logged(make_gateway: MakeGateway) -> None:
    gw, _ = cached_gateway(make_gateway)
    chat(gw, headers={"X-Request-ID": "first"})
    chat(gw, headers={"X-Request-ID": "second"})
    rows = {r.request_id: r for r in gw.run(gw.state.store.recent_requests(10))}
    assert rows["second"].route == "cache" and rows["second"].extra["X-FreeLLM-Cache"] == "HIT"
    assert rows["first"].extra["X-FreeLLM-Cache"] == "MISS"


def test_inline_directive_scenarios_are_part_of_the_key(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """Different prompts (here: different simulator directives) are different entries."""
    gw, alpha = cached_gateway(make_gateway)
    a = chat(gw, messages=[{"role": "user", "content": "Hi " + directive({alpha: {"text": "one"}})}])
    b = chat(gw, messages=[{"role": "user", "content": "Hi " + directive({alpha: {"text": "two"}})}])
    assert json.loads(a.content)["choices"][0]["message"]["content"] == "one"
    assert json.loads(b.content)["choices"][0]["message"]["content"] == "two"
    assert calls(sim_control, alpha) == 2
