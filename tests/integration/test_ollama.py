"""Over the wire: the Ollama API under /api/, driven by the official ``ollama`` Python client and by
plain HTTP for the raw NDJSON frames (docs/surfaces/ollama.md)."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import httpx2 as httpx
import ollama
import pytest
from PIL import Image

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import MODEL, MakeGateway, one_route, two_routes, upstream


def png(size: int = 4) -> str:
    """A real PNG, base64 as Ollama clients send images (no data-URL prefix)."""
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), (200, 30, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def client(gw: GatewayServer, **headers: str) -> ollama.Client:
    return ollama.Client(host=gw.base_url, headers=headers or None, timeout=15)


def ndjson(gw: GatewayServer, path: str, body: dict[str, Any], **headers: str) -> tuple[httpx.Response, list[dict[str, Any]]]:
    resp = httpx.post(f"{gw.base_url}{path}", json=body, headers=headers, timeout=15)
    lines = [json.loads(line) for line in resp.text.splitlines() if line.strip()]
    return resp, lines


# ---- chat ---------------------------------------------------------------------------------------------


def test_chat_streams_ndjson_and_fails_over_before_the_first_token(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500})
    parts = list(client(gw).chat(model="auto", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert "".join(p.message.content or "" for p in parts) == f"Hello from {b}/{MODEL}."
    final = parts[-1]
    assert final.done and final.done_reason == "stop"
    assert (final.eval_count or 0) >= 1 and (final.total_duration or 0) >= 1
    assert all(not p.done for p in parts[:-1])
    assert len(upstream(sim_control, a)) == 1 and len(upstream(sim_control, b)) == 1


def test_chat_raw_frames(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Hi there", "chunks": 2, "reasoning": "Let me think."})
    resp, lines = ndjson(gw, "/api/chat", {"model": f"{MODEL}:latest", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/x-ndjson")
    assert resp.headers["x-routed-via"] == f"{a}/{MODEL}"
    *body, final = lines
    assert all(line["model"] == f"{MODEL}:latest" and line["created_at"].endswith("Z") for line in lines)
    thinking = "".join(line["message"].get("thinking", "") for line in body)
    assert thinking == "Let me think."
    assert "".join(line["message"]["content"] for line in body) == "Hi there"
    assert all(line["done"] is False and line["message"]["role"] == "assistant" for line in body)
    assert final["done"] is True and final["done_reason"] == "stop" and final["message"] == {"role": "assistant", "content": ""}
    for field in ("total_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"):
        assert isinstance(final[field], int) and final[field] >= 1, field
    assert final["load_duration"] == 0
    [sent] = upstream(sim_control, a)
    assert sent["body"]["model"] == MODEL  # :latest stripped


def test_chat_without_stream_is_one_object_and_think_false_hides_thinking(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Plain.", "reasoning": "hidden"}, times=2)
    # an empty model routes like auto (raw HTTP: the client library refuses to send one)
    resp = httpx.post(
        f"{gw.base_url}/api/chat",
        json={"model": "", "messages": [{"role": "user", "content": "hi"}], "stream": False, "think": False},
    )
    assert resp.headers["content-type"].startswith("application/json")
    reply = resp.json()
    assert reply["message"] == {"role": "assistant", "content": "Plain."} and reply["done"] and reply["model"] == "auto"
    shown = client(gw).chat(model="auto", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert shown.message.thinking == "hidden"


def test_chat_tool_calls_come_whole_with_object_arguments_and_history_maps_back(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}], "tool_fragments": 3})
    tool = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    _, lines = ndjson(gw, "/api/chat", {"model": "auto", "messages": [{"role": "user", "content": "weather?"}], "tools": [tool]})
    calls = [line for line in lines if line.get("message", {}).get("tool_calls")]
    assert len(calls) == 1 and calls[0]["done"] is False
    assert calls[0]["message"]["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    assert lines[-1]["done_reason"] == "stop"  # never "tool_calls" on this wire
    # the next turn sends the call back with object arguments and the result by tool name
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_name": "get_weather", "content": "sunny"},
    ]
    reply = client(gw).chat(model="auto", messages=history, tools=[tool], stream=False)
    assert reply.done
    sent = upstream(sim_control, a)[-1]["body"]["messages"]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert sent[2] == {"role": "tool", "tool_call_id": sent[1]["tool_calls"][0]["id"], "content": "sunny"}


def test_chat_options_format_and_images_reach_the_upstream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a = unique("alpha")
    gw = make_gateway({a: [MODEL]}, model_options={f"{a}/{MODEL}": {"vision": True}})
    sim_control.script(a, {"text": '{"ok": true}'})
    reply = client(gw).chat(
        model="auto",
        messages=[{"role": "user", "content": "describe", "images": [png()]}],
        format={"type": "object", "properties": {"ok": {"type": "boolean"}}},
        options={"num_predict": 77, "temperature": 0.2, "top_k": 5, "stop": ["END"]},
        stream=False,
    )
    assert json.loads(reply.message.content or "") == {"ok": True}
    body = upstream(sim_control, a)[-1]["body"]
    assert body["max_tokens"] == 77 and body["temperature"] == 0.2 and body["top_k"] == 5 and body["stop"] == ["END"]
    assert body["response_format"]["type"] == "json_schema"
    image = body["messages"][0]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")


def test_empty_messages_and_prompt_are_the_load_answer_without_an_upstream_call(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    loaded = httpx.post(f"{gw.base_url}/api/chat", json={"model": "auto", "messages": []}).json()
    assert loaded["done"] is True and loaded["done_reason"] == "load" and loaded["message"]["content"] == ""
    unloaded = httpx.post(f"{gw.base_url}/api/generate", json={"model": "auto", "keep_alive": 0}).json()
    assert unloaded["done_reason"] == "unload" and unloaded["response"] == ""
    assert upstream(sim_control, a) == []


# ---- generate -----------------------------------------------------------------------------------------


def test_generate_streams_response_lines_and_one_object(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    parts = list(client(gw).generate(model="auto", prompt="Say hello", system="Be brief.", stream=True))
    assert "".join(p.response for p in parts) == f"Hello from {a}/{MODEL}."
    assert parts[-1].done and parts[-1].context == []
    one = client(gw).generate(model="auto", prompt="def add(a, b):", suffix="return c", stream=False)
    assert one.response == f"Hello from {a}/{MODEL}." and one.done_reason == "stop"
    messages = upstream(sim_control, a)[-1]["body"]["messages"]
    assert messages[-1]["role"] == "user" and "return c" in messages[-1]["content"]
    first = upstream(sim_control, a)[0]["body"]["messages"]
    assert first[0] == {"role": "system", "content": "Be brief."}


# ---- models -------------------------------------------------------------------------------------------


def test_list_show_version_and_ps(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    names = [m.model for m in client(gw).list().models]
    assert names[0] == "auto" and MODEL in names
    card = client(gw).show(MODEL)
    assert "tools" in (card.capabilities or []) and card.modelfile == f"FROM {MODEL}"
    assert httpx.get(f"{gw.base_url}/api/version").json() == {"version": "0.9.9"}
    assert httpx.get(f"{gw.base_url}/api/ps").json() == {"models": []}
    missing = httpx.post(f"{gw.base_url}/api/show", json={"model": "nope"})
    assert missing.status_code == 404 and missing.json() == {"error": "model 'nope' not found"}
    assert httpx.post(f"{gw.base_url}/api/show", json={}).status_code == 400


# ---- errors and access --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"model": "auto", "messages": "hi"},
        {"model": 3, "messages": [{"role": "user", "content": "hi"}]},
        {"model": "auto", "messages": [{"role": "robot", "content": "hi"}]},
        {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "options": {"temperature": "hot"}},
        {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
        {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "format": "xml"},
        [],
    ],
)
def test_wrong_types_are_ollama_errors_with_no_upstream_call(
    make_gateway: MakeGateway, sim_control: SimControl, body: Any
) -> None:
    gw, a = one_route(make_gateway)
    resp = httpx.post(f"{gw.base_url}/api/chat", json=body)
    assert resp.status_code == 400
    error = resp.json()
    assert set(error) == {"error"} and isinstance(error["error"], str) and "Traceback" not in error["error"]
    assert upstream(sim_control, a) == []


def test_a_post_commit_failure_is_an_error_line_with_done(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"chunks": 4, "cut_after": 2})
    resp, lines = ndjson(gw, "/api/chat", {"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200
    assert lines[-1]["done"] is True and "error" in lines[-1]
    assert all("error" not in line for line in lines[:-1])


def test_exhaustion_is_an_ollama_error(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"status": 500}, times=None)
    resp = httpx.post(f"{gw.base_url}/api/chat", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 502 and set(resp.json()) == {"error"}
    with pytest.raises(ollama.ResponseError) as err:  # now the route cools down: a 429 the client reads
        client(gw).chat(model="auto", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert err.value.status_code == 429 and "exhausted" in err.value.error


def test_loopback_mode_refuses_a_forwarded_remote_client(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    assert httpx.get(f"{gw.base_url}/api/tags").status_code == 200  # no key needed from this machine
    local = httpx.get(f"{gw.base_url}/api/tags", headers={"X-Forwarded-For": "127.0.0.1, 10.0.0.9"})
    assert local.status_code == 200
    remote = httpx.get(f"{gw.base_url}/api/tags", headers={"X-Forwarded-For": "203.0.113.7"})
    assert remote.status_code == 403 and set(remote.json()) == {"error"}


def test_key_mode_wants_a_client_key_and_off_mode_has_no_routes(make_gateway: MakeGateway) -> None:
    keyed, _ = one_route(make_gateway, extra={"ollama": {"mode": "key"}})
    assert httpx.get(f"{keyed.base_url}/api/tags").status_code == 401
    assert httpx.get(f"{keyed.base_url}/api/tags", headers={"Authorization": "Bearer wrong"}).status_code == 401
    names = [m.model for m in client(keyed, Authorization=f"Bearer {CLIENT_KEY}").list().models]
    assert "auto" in names
    off, _ = one_route(make_gateway, extra={"ollama": {"mode": "off"}})
    resp = httpx.get(f"{off.base_url}/api/tags", headers={"Authorization": f"Bearer {CLIENT_KEY}"})
    assert resp.status_code == 404 and resp.json() == {"error": "Ollama emulation is disabled"}
