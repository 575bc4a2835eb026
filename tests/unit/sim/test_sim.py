"""The upstream simulator over real HTTP: normal streams, every scripted fault, scripting semantics,
the control API and the official ``openai`` SDK as a client.

Synchronisation is by the simulator's own events (``/_sim/wait``), never by sleeping.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from freellm.sim import (
    SIM_STATE,
    Scenario,
    ScenarioError,
    SimConfigError,
    SimControl,
    SimServer,
    SimSettings,
    build_sim_settings,
    load_sim_settings,
    parse_scenario,
    start_sim,
)
from freellm.sim.control import SimControlError
from freellm.sim.plan import split_even

AUTH = {"Authorization": "Bearer test-key"}


def chat_body(
    text: str = "hello there", stream: bool = True, model: str = "model-x", **extra: Any
) -> dict[str, Any]:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}], **extra}


def directive(spec: dict[str, Any], prefix: str = "please answer") -> str:
    return f"{prefix} [[sim:{orjson.dumps(spec).decode()}]]"


def parse_sse(raw: str) -> list[str]:
    """``data:`` payloads of every event, in order (comments and other fields dropped)."""
    payloads = []
    for event in raw.split("\n\n"):
        data = [line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")]
        if data:
            payloads.append("\n".join(data))
    return payloads


def json_frames(payloads: list[str]) -> list[dict[str, Any]]:
    return [orjson.loads(p) for p in payloads if p != "[DONE]"]


def content_of(frames: list[dict[str, Any]]) -> str:
    return "".join(
        c["delta"].get("content") or "" for f in frames for c in f.get("choices", []) if "delta" in c
    )


async def stream_raw(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[aiohttp.ClientResponse, str]:
    async with http.post(url + "/chat/completions", json=body, headers=headers or AUTH) as resp:
        return resp, (await resp.read()).decode()


async def read_until_failure(resp: aiohttp.ClientResponse) -> tuple[bytes, BaseException | None]:
    """Read a body chunk by chunk, returning what arrived and the error that ended it (if any)."""
    got = b""
    try:
        async for chunk in resp.content.iter_any():
            got += chunk
    except (aiohttp.ClientError, TimeoutError) as exc:
        return got, exc
    return got, None


# ---- healthy streams -------------------------------------------------------------------------------------


async def test_normal_stream_frames(sim: SimServer, http: aiohttp.ClientSession) -> None:
    resp, raw = await stream_raw(http, sim.provider_url("alpha"), chat_body())
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    assert resp.headers["X-Sim-Request-Id"].startswith("req-")
    payloads = parse_sse(raw)
    assert payloads[-1] == "[DONE]"
    frames = json_frames(payloads)
    assert all(f["object"] == "chat.completion.chunk" and f["model"] == "model-x" for f in frames)
    assert frames[0]["id"].startswith("chatcmpl-sim-")
    assert len({f["id"] for f in frames}) == 1
    assert frames[0]["choices"][0]["delta"]["role"] == "assistant"
    assert content_of(frames) == "Hello from alpha/model-x."
    text_frames = [f for f in frames if f["choices"] and f["choices"][0]["delta"].get("content")]
    assert len(text_frames) == 3  # default chunks
    finish = frames[-2]
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert finish["choices"][0]["delta"] == {}
    usage = frames[-1]
    assert usage["choices"] == []
    assert usage["usage"]["prompt_tokens"] == len("hello there") // 4
    assert usage["usage"]["completion_tokens"] == len("Hello from alpha/model-x.") // 4
    assert (
        usage["usage"]["total_tokens"]
        == usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"]
    )


async def test_plain_v1_is_default_provider_and_models(sim: SimServer, http: aiohttp.ClientSession) -> None:
    _, raw = await stream_raw(http, sim.base_url + "/v1", chat_body(model="mx"))
    assert content_of(json_frames(parse_sse(raw))) == "Hello from default/mx."
    async with http.get(sim.provider_url("beta") + "/models", headers=AUTH) as resp:
        listing = await resp.json()
    assert [m["id"] for m in listing["data"]] == ["model-x", "model-y", "model-z"]
    assert listing["data"][0]["owned_by"] == "beta"


async def test_missing_auth_is_401(sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl) -> None:
    async with http.post(sim.provider_url("alpha") + "/chat/completions", json=chat_body()) as resp:
        assert resp.status == 401
        body = await resp.json()
    assert body["error"]["code"] == "invalid_api_key"
    async with http.get(sim.provider_url("alpha") + "/models") as resp:
        assert resp.status == 401
    [entry] = await ctl.requests_async("alpha")
    assert entry["outcome"] == "unauthorized" and entry["key"] is None


async def test_bad_request_is_400(sim: SimServer, http: aiohttp.ClientSession) -> None:
    async with http.post(
        sim.provider_url("alpha") + "/chat/completions", data=b"{nope", headers=AUTH
    ) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["type"] == "invalid_request_error"


async def test_usage_last_and_none(sim: SimServer, http: aiohttp.ClientSession) -> None:
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive({"*": {"usage": "last"}})))
    frames = json_frames(parse_sse(raw))
    assert all(f["choices"] for f in frames)  # no choice-less usage frame
    assert frames[-1]["choices"][0]["finish_reason"] == "stop"
    assert frames[-1]["usage"]["completion_tokens"] >= 1
    assert sum("usage" in f for f in frames) == 1

    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive({"*": {"usage": "none"}})))
    assert not any("usage" in f for f in json_frames(parse_sse(raw)))


async def test_reasoning_then_text(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {"*": {"reasoning": "let me think", "reasoning_field": "reasoning", "text": "done", "chunks": 1}}
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive(spec)))
    frames = json_frames(parse_sse(raw))
    deltas = [f["choices"][0]["delta"] for f in frames if f["choices"]]
    assert deltas[0] == {"role": "assistant", "reasoning": "let me"}
    assert deltas[1] == {"reasoning": " think"}
    assert deltas[2] == {"content": "done"}


async def test_tool_call_fragments_reassemble(sim: SimServer, http: aiohttp.ClientSession) -> None:
    calls: list[dict[str, Any]] = [
        {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}', "id": "call_1"},
        {"name": "get_time", "arguments": {"tz": "UTC"}},
    ]
    spec = {"*": {"tool_calls": calls, "tool_fragments": 4}}
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive(spec)))
    frames = json_frames(parse_sse(raw))
    assembled: dict[int, dict[str, str]] = {}
    fragments = 0
    for f in frames:
        for choice in f["choices"]:
            for tc in choice["delta"].get("tool_calls") or []:
                slot = assembled.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                if "id" in tc:
                    assert tc["type"] == "function" and tc["function"]["arguments"] == ""
                    slot["id"] = tc["id"]
                    slot["name"] = tc["function"]["name"]
                else:
                    assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
                    slot["arguments"] += tc["function"]["arguments"]
                    fragments += 1
    assert assembled[0] == {"id": "call_1", "name": "get_weather", "arguments": calls[0]["arguments"]}
    assert assembled[1]["name"] == "get_time"
    assert orjson.loads(assembled[1]["arguments"]) == {"tz": "UTC"}
    assert assembled[1]["id"]
    assert fragments == 8
    assert content_of(frames) == ""
    assert frames[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [f for f in frames if f["choices"]][-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_chunk_count_and_delay(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {"*": {"text": "abcdefghijklmnopqrstuvwxyz", "chunks": 20, "chunk_delay_ms": 5}}
    start = time.monotonic()
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive(spec)))
    elapsed = time.monotonic() - start
    frames = json_frames(parse_sse(raw))
    assert sum(1 for f in frames if f["choices"] and f["choices"][0]["delta"].get("content")) == 20
    assert content_of(frames) == "abcdefghijklmnopqrstuvwxyz"
    assert elapsed >= 19 * 0.005


# ---- faults ----------------------------------------------------------------------------------------------


async def test_status_429_with_retry_after(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("alpha", {"status": 429, "retry_after": 7, "error_message": "slow down"}, times=2)
    for stream in (True, False):
        async with http.post(
            sim.provider_url("alpha") + "/chat/completions", json=chat_body(stream=stream), headers=AUTH
        ) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "7"
            body = await resp.json()
        assert body["error"] == {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    entries = await ctl.requests_async("alpha")
    assert [(e["outcome"], e["status"]) for e in entries] == [("error_status", 429)] * 2


async def test_error_body_verbatim(sim: SimServer, http: aiohttp.ClientSession) -> None:
    custom = {"detail": "quota", "nested": [1, 2]}
    spec = {"*": {"status": 402, "error_body": custom}}
    async with http.post(
        sim.provider_url("a") + "/chat/completions", json=chat_body(directive(spec)), headers=AUTH
    ) as resp:
        assert resp.status == 402
        assert await resp.json() == custom
    spec = {"*": {"status": 502, "error_body": "<html>Bad Gateway</html>"}}
    async with http.post(
        sim.provider_url("a") + "/chat/completions", json=chat_body(directive(spec)), headers=AUTH
    ) as resp:
        assert resp.status == 502
        assert resp.content_type == "text/html"
        assert await resp.text() == "<html>Bad Gateway</html>"


async def test_inband_error(sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl) -> None:
    await ctl.script_async("a", {"inband_error": "overloaded", "inband_error_after": 1})
    resp, raw = await stream_raw(http, sim.provider_url("a"), chat_body())
    payloads = parse_sse(raw)
    assert payloads[-1] == "[DONE]"
    frames = json_frames(payloads)
    assert content_of(frames) == "Hello f"  # first of three chunks of "Hello from a/model-x."
    assert len([f for f in frames if "choices" in f]) == 1
    assert frames[-1] == {"error": {"message": "overloaded", "type": "server_error"}}
    assert not any(c.get("finish_reason") for f in frames for c in f.get("choices", []))
    entry = await ctl.wait_ended_async(resp.headers["X-Sim-Request-Id"])
    assert entry["outcome"] == "inband_error"


async def test_cut_after_raises_without_done(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("a", {"cut_after": 2})
    async with http.post(sim.provider_url("a") + "/chat/completions", json=chat_body(), headers=AUTH) as resp:
        got, err = await read_until_failure(resp)
        request_id = resp.headers["X-Sim-Request-Id"]
    assert isinstance(err, aiohttp.ClientPayloadError)
    frames = json_frames(parse_sse(got.decode()))
    assert "[DONE]" not in got.decode()
    assert len(frames) == 2
    assert not any(c["finish_reason"] for f in frames for c in f["choices"])
    assert (await ctl.wait_ended_async(request_id))["outcome"] == "cut"


async def test_cut_after_zero_sends_reasoning_first(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {"*": {"cut_after": 0, "reasoning": "hmm, ok"}}
    async with http.post(
        sim.provider_url("a") + "/chat/completions", json=chat_body(directive(spec)), headers=AUTH
    ) as resp:
        got, err = await read_until_failure(resp)
    assert isinstance(err, aiohttp.ClientPayloadError)
    deltas = [f["choices"][0]["delta"] for f in json_frames(parse_sse(got.decode()))]
    assert [d.get("reasoning_content") for d in deltas] == ["hmm", ", ok"]


async def test_stall_after_client_timeout_logs_disconnect(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("a", {"stall_after": 1})
    timeout = aiohttp.ClientTimeout(sock_read=0.3)
    async with http.post(
        sim.provider_url("a") + "/chat/completions", json=chat_body(), headers=AUTH, timeout=timeout
    ) as resp:
        request_id = resp.headers["X-Sim-Request-Id"]
        got, err = await read_until_failure(resp)
    assert isinstance(err, TimeoutError)
    assert content_of(json_frames(parse_sse(got.decode()))) == "Hello f"
    entry = await ctl.wait_ended_async(request_id, timeout=5)
    assert entry["outcome"] == "client_disconnected"
    assert entry["ended_at"] >= entry["started_at"]


async def test_stall_after_zero_is_headers_then_silence(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("a", {"stall_after": 0})
    timeout = aiohttp.ClientTimeout(sock_read=0.2)
    async with http.post(
        sim.provider_url("a") + "/chat/completions", json=chat_body(), headers=AUTH, timeout=timeout
    ) as resp:
        assert resp.status == 200
        request_id = resp.headers["X-Sim-Request-Id"]
        with pytest.raises(TimeoutError):
            await ctl.wait_ended_async(request_id, timeout=0.05)
        got, err = await read_until_failure(resp)
    assert got == b"" and isinstance(err, TimeoutError)
    assert (await ctl.wait_ended_async(request_id))["outcome"] == "client_disconnected"


async def test_wait_times_out_with_timeout_error(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("a", {"stall_after": 0})
    async with http.post(sim.provider_url("a") + "/chat/completions", json=chat_body(), headers=AUTH) as resp:
        request_id = resp.headers["X-Sim-Request-Id"]
        waiter = asyncio.create_task(ctl.wait_ended_async(request_id, timeout=0.1))
        with pytest.raises(TimeoutError):
            await waiter
    assert (await ctl.wait_ended_async(request_id))["outcome"] == "client_disconnected"
    with pytest.raises(SimControlError) as unknown:
        await ctl.wait_ended_async("req-999999", timeout=0.1)
    assert unknown.value.status == 404


async def test_client_leaving_mid_stream_is_logged(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("a", {"chunks": 10, "chunk_delay_ms": 50})
    async with http.post(sim.provider_url("a") + "/chat/completions", json=chat_body(), headers=AUTH) as resp:
        request_id = resp.headers["X-Sim-Request-Id"]
        assert (await resp.content.readline()).startswith(b"data: ")
    # Leaving the block closes the connection with the stream half sent.
    assert (await ctl.wait_ended_async(request_id))["outcome"] == "client_disconnected"


async def test_close_ends_stalled_requests_at_once(http: aiohttp.ClientSession) -> None:
    server = await start_sim()
    await SimControl(server.base_url).script_async("a", {"stall_after": 0})
    async with http.post(
        server.provider_url("a") + "/chat/completions", json=chat_body(), headers=AUTH
    ) as resp:
        record = server.app[SIM_STATE].records[resp.headers["X-Sim-Request-Id"]]
        started = time.monotonic()
        await server.close()
        assert time.monotonic() - started < 1.0
        assert record.outcome == "server_closed"
        got, err = await read_until_failure(resp)
    assert got == b"" and isinstance(err, aiohttp.ClientPayloadError)


async def test_first_byte_delay(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {"*": {"first_byte_delay_ms": 150}}
    start = time.monotonic()
    async with http.post(
        sim.provider_url("a") + "/chat/completions", json=chat_body(directive(spec)), headers=AUTH
    ) as resp:
        headers_at = time.monotonic() - start
        await resp.read()
    assert headers_at >= 0.15
    timeout = aiohttp.ClientTimeout(sock_read=0.05)
    with pytest.raises(TimeoutError):
        async with http.post(
            sim.provider_url("a") + "/chat/completions",
            json=chat_body(directive(spec)),
            headers=AUTH,
            timeout=timeout,
        ) as resp:
            await resp.read()


async def test_empty_stream(sim: SimServer, http: aiohttp.ClientSession) -> None:
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive({"*": {"empty": True}})))
    payloads = parse_sse(raw)
    frames = json_frames(payloads)
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert frames[1]["choices"][0]["finish_reason"] == "stop"
    assert frames[2]["choices"] == [] and frames[2]["usage"]["completion_tokens"] == 1
    assert payloads[-1] == "[DONE]" and len(frames) == 3


async def test_finish_null_and_done_false(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {"*": {"finish_reason": None, "done": False, "usage": "last"}}
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive(spec)))
    payloads = parse_sse(raw)
    assert "[DONE]" not in payloads
    frames = json_frames(payloads)
    assert all(c["finish_reason"] is None for f in frames for c in f["choices"])
    assert content_of(frames) == "Hello from a/model-x."
    assert "usage" in frames[-1] and frames[-1]["choices"][0]["delta"].get("content")


async def test_malformed_and_keepalive(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {"*": {"malformed": True, "keepalive_comments": 2}}
    _, raw = await stream_raw(http, sim.provider_url("a"), chat_body(directive(spec)))
    assert raw.startswith(": keep-alive\n\n: keep-alive\n\ndata: {")
    assert "data: {not json\n" in raw
    assert "\n: sim comment\n" in raw
    lines = [line for line in raw.split("\n") if line]
    assert any(not line.startswith(("data:", ":")) for line in lines)
    good = [p for p in parse_sse(raw) if p != "{not json"]
    assert good[-1] == "[DONE]"
    assert content_of(json_frames(good)) == "Hello from a/model-x."


# ---- non-stream ------------------------------------------------------------------------------------------


async def post_json(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(url + "/chat/completions", json=body, headers=AUTH) as resp:
        return resp.status, await resp.json()


async def test_non_stream_completion(sim: SimServer, http: aiohttp.ClientSession) -> None:
    status, body = await post_json(http, sim.provider_url("alpha"), chat_body(stream=False))
    assert status == 200
    assert body["object"] == "chat.completion" and body["model"] == "model-x"
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello from alpha/model-x."}
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 6


async def test_non_stream_variants(sim: SimServer, http: aiohttp.ClientSession) -> None:
    spec = {
        "*": {"reasoning": "why", "tool_calls": [{"name": "f", "arguments": "{}"}], "content_array": True}
    }
    _, body = await post_json(http, sim.provider_url("a"), chat_body(directive(spec), stream=False))
    msg = body["choices"][0]["message"]
    assert msg["content"] == [] and msg["reasoning_content"] == "why"
    assert msg["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}
    assert body["choices"][0]["finish_reason"] == "tool_calls"

    spec = {"*": {"text": "hi", "content_array": True, "finish_reason": "length", "usage": "none"}}
    _, body = await post_json(http, sim.provider_url("a"), chat_body(directive(spec), stream=False))
    assert body["choices"][0]["message"]["content"] == [{"type": "text", "text": "hi"}]
    assert body["choices"][0]["finish_reason"] == "length" and "usage" not in body

    status, body = await post_json(
        http, sim.provider_url("a"), chat_body(directive({"*": {"inband_error": "boom"}}), stream=False)
    )
    assert status == 200 and body["error"]["message"] == "boom"


async def test_non_stream_cut_and_stall(sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl) -> None:
    await ctl.script_async("a", {"cut_after": 0})
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await post_json(http, sim.provider_url("a"), chat_body(stream=False, text="cut-me"))
    [cut] = await ctl.requests_async("a", match="cut-me")
    assert (await ctl.wait_ended_async(cut["id"]))["outcome"] == "cut"

    await ctl.script_async("a", {"stall_after": 0})
    with pytest.raises(TimeoutError):
        async with http.post(
            sim.provider_url("a") + "/chat/completions",
            json=chat_body(stream=False, text="stall-me"),
            headers=AUTH,
            timeout=aiohttp.ClientTimeout(total=0.2),
        ) as resp:
            await resp.read()
    [stalled] = await ctl.requests_async("a", match="stall-me")
    assert (await ctl.wait_ended_async(stalled["id"]))["outcome"] == "client_disconnected"


# ---- scripting -------------------------------------------------------------------------------------------


async def test_inline_directive_per_provider(sim: SimServer, http: aiohttp.ClientSession) -> None:
    text = directive({"alpha": {"status": 503}, "*": {"text": "fallback ok"}})
    status, _ = await post_json(http, sim.provider_url("alpha"), chat_body(text, stream=False))
    assert status == 503
    status, body = await post_json(http, sim.provider_url("beta"), chat_body(text, stream=False))
    assert body["choices"][0]["message"]["content"] == "fallback ok"
    status, body = await post_json(
        http, sim.provider_url("alpha"), chat_body(directive({"alpha": {"oops": 1}}), stream=False)
    )
    assert status == 400 and "oops" in body["error"]["message"]


async def test_script_fifo_times_and_reset(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("alpha", {"text": "first"})
    await ctl.script_async("alpha", {"text": "second"}, times=2)
    await ctl.script_async("beta", {"text": "beta only"}, times=None)
    url = sim.provider_url("alpha")
    seen = []
    for _ in range(4):
        _, body = await post_json(http, url, chat_body(stream=False))
        seen.append(body["choices"][0]["message"]["content"])
    assert seen == ["first", "second", "second", "Hello from alpha/model-x."]
    for _ in range(2):
        _, body = await post_json(http, sim.provider_url("beta"), chat_body(stream=False))
        assert body["choices"][0]["message"]["content"] == "beta only"
    assert len(await ctl.requests_async()) == 6
    assert [e["source"] for e in await ctl.requests_async("alpha")][:2] == ["script:1", "script:2"]
    await ctl.reset_async()
    assert await ctl.requests_async() == []
    _, body = await post_json(http, sim.provider_url("beta"), chat_body(stream=False))
    assert body["choices"][0]["message"]["content"] == "Hello from beta/model-x."


async def test_script_match_key_and_model(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("a", {"text": "matched"}, match="needle")
    await ctl.script_async("a", {"text": "keyed"}, key="key-2")
    await ctl.script_async("a", {"text": "model-y only"}, model="model-y")
    url = sim.provider_url("a")
    _, body = await post_json(http, url, chat_body("no match here", stream=False))
    assert body["choices"][0]["message"]["content"] == "Hello from a/model-x."  # none of the three apply
    _, body = await post_json(http, url, chat_body("find the needle", stream=False))
    assert body["choices"][0]["message"]["content"] == "matched"
    _, body = await post_json(http, url, chat_body(stream=False, model="model-y"))
    assert body["choices"][0]["message"]["content"] == "model-y only"
    async with http.post(
        url + "/chat/completions", json=chat_body(stream=False), headers={"Authorization": "Bearer key-2"}
    ) as resp:
        assert (await resp.json())["choices"][0]["message"]["content"] == "keyed"
    log = await ctl.requests_async("a")
    assert [e["key"] for e in log] == ["test-key", "test-key", "test-key", "key-2"]
    assert [e["body"]["model"] for e in log] == ["model-x", "model-x", "model-y", "model-x"]


async def test_defaults_via_settings_and_control(http: aiohttp.ClientSession) -> None:
    settings = SimSettings(
        default=parse_scenario({"text": "server default"}),
        models=["only-model"],
        per_model={"alpha/model-x": parse_scenario({"text": "alpha x default"})},
    )
    async with await start_sim(settings=settings) as server:
        ctl = SimControl(server.base_url)
        _, body = await post_json(http, server.provider_url("alpha"), chat_body(stream=False))
        assert body["choices"][0]["message"]["content"] == "alpha x default"
        _, body = await post_json(http, server.provider_url("beta"), chat_body(stream=False))
        assert body["choices"][0]["message"]["content"] == "server default"
        await ctl.set_default_async({"text": "beta star"}, provider="beta")
        _, body = await post_json(http, server.provider_url("beta"), chat_body(stream=False, model="zz"))
        assert body["choices"][0]["message"]["content"] == "beta star"
        await ctl.reset_async()
        _, body = await post_json(http, server.provider_url("beta"), chat_body(stream=False))
        assert body["choices"][0]["message"]["content"] == "server default"
        async with http.get(server.provider_url("beta") + "/models", headers=AUTH) as resp:
            assert [m["id"] for m in (await resp.json())["data"]] == ["only-model"]


async def test_control_rejects_bad_scripts(ctl: SimControl) -> None:
    with pytest.raises(SimControlError) as bad_field:
        await ctl.script_async("a", {"chunk": 3})
    assert bad_field.value.status == 400 and "chunk" in str(bad_field.value.detail)
    with pytest.raises(SimControlError):
        await ctl.script_async("a", {"chunks": 0})
    with pytest.raises(SimControlError):
        await ctl.script_async("a", {"text": "x"}, times=0)


def test_scenario_parsing_is_strict() -> None:
    assert parse_scenario({}) == Scenario()
    with pytest.raises(ScenarioError, match="unknown"):
        parse_scenario({"txt": "typo"})
    with pytest.raises(ScenarioError, match="status"):
        parse_scenario({"retry_after": "5"})
    with pytest.raises(ScenarioError, match="usage"):
        parse_scenario({"usage": "sometimes"})
    with pytest.raises(ScenarioError):
        parse_scenario({"tool_calls": [{"name": "f", "extra": 1}]})
    assert parse_scenario({"finish_reason": None}).effective_finish_reason() is None
    assert parse_scenario({"tool_calls": [{"name": "f"}]}).effective_finish_reason() == "tool_calls"
    assert split_even("abcdefg", 3) == ("ab", "cd", "efg")
    assert split_even("ab", 5) == ("a", "b")


def test_load_sim_settings(tmp_path: Path) -> None:
    path = tmp_path / "sim.yaml"
    path.write_text(
        "default: {chunks: 20}\nmodels: [m1]\nper_model:\n  alpha/m1: {status: 429, retry_after: 3}\n"
    )
    settings = load_sim_settings(path)
    assert settings.default.chunks == 20 and settings.models == ["m1"]
    assert settings.per_model["alpha/m1"].retry_after == "3"
    tuned = build_sim_settings(path, chunks=5, chunk_delay_ms=2)
    assert (tuned.default.chunks, tuned.default.chunk_delay_ms) == (5, 2.0)
    path.write_text('{"defaults": {}}')
    with pytest.raises(SimConfigError, match="defaults"):
        load_sim_settings(path)


async def test_two_simulators_are_independent(http: aiohttp.ClientSession) -> None:
    async with await start_sim() as one, await start_sim() as two:
        await SimControl(one.base_url).script_async("a", {"text": "from one"}, times=None)
        _, body = await post_json(http, two.provider_url("a"), chat_body(stream=False))
        assert body["choices"][0]["message"]["content"] == "Hello from a/model-x."
        assert await SimControl(two.base_url).requests_async() != []
        assert len(await SimControl(one.base_url).requests_async()) == 0


# ---- the official SDK as a client ------------------------------------------------------------------------


async def test_openai_sdk_reads_stream_and_completion(sim: SimServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(base_url=sim.provider_url("alpha"), api_key="sk-sim", max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="model-x",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text = ""
        finish = None
        usage = None
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        assert text == "Hello from alpha/model-x."
        assert finish == "stop"
        assert usage is not None and usage.completion_tokens == 6

        completion = await client.chat.completions.create(
            model="model-y", messages=[{"role": "user", "content": "hi"}]
        )
        assert completion.choices[0].message.content == "Hello from alpha/model-y."
        assert completion.usage is not None and completion.usage.total_tokens >= 1

        tools = directive({"*": {"tool_calls": [{"name": "lookup", "arguments": '{"q": "x"}'}]}})
        stream = await client.chat.completions.create(
            model="model-x", messages=[{"role": "user", "content": tools}], stream=True
        )
        args = ""
        async for chunk in stream:
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    args += (tc.function.arguments or "") if tc.function else ""
        assert args == '{"q": "x"}'
    finally:
        await client.close()
