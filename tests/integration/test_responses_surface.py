"""Over the wire: the stateful Responses API surface (``/v1/responses``) with the official ``openai`` SDK.

Every test starts a fresh gateway in front of the shared simulator with its own provider names, drives
it with the SDK (``responses.create``, ``responses.stream()``, ``retrieve``, ``delete``) or raw HTTP where
the SDK would hide the frames, and checks what the simulator received: the chained conversation must
reach the upstream as chat messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
import openai
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import AUTH, MakeGateway, one_route, sdk, two_routes, upstream

MODEL = "model-x"
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}


@dataclass
class RawEvents:
    status: int
    headers: httpx.Headers
    events: list[dict[str, Any]] = field(default_factory=list)
    """Each frame's data, in order; ``event:`` lines are checked against ``type`` while reading."""
    json_body: Any = None
    other_lines: list[str] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


def post_raw(gw: GatewayServer, payload: Any, *, headers: dict[str, str] | None = None) -> RawEvents:
    """POST to ``/v1/responses`` and read the SSE frames (or the JSON error) off the wire."""
    with httpx.Client(timeout=20) as client, client.stream(
        "POST", f"{gw.v1}/responses", json=payload, headers={**AUTH, **(headers or {})}
    ) as resp:
        out = RawEvents(status=resp.status_code, headers=resp.headers)
        if resp.status_code != 200 or not resp.headers["content-type"].startswith("text/event-stream"):
            resp.read()
            out.json_body = resp.json()
            return out
        event: str | None = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                assert event is None
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                assert data["type"] == event
                out.events.append(data)
                event = None
            elif line.strip():
                out.other_lines.append(line)
    return out


def raw_request(gw: GatewayServer, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(method, f"{gw.v1}{path}", headers={**AUTH, **kw.pop("headers", {})}, timeout=20, **kw)


def assert_responses_error(body: Any, *, param: str | None = None, code: str | None = None) -> None:
    assert set(body) == {"error"}
    err = body["error"]
    assert {"message", "type", "param", "code"} <= set(err)
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param
    if code is not None:
        assert err["code"] == code


# -- create: non-stream and stream ----------------------------------------------------------------------


def test_create_non_stream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Hi there, human.", "chunks": 2})

    raw = sdk(gw).responses.with_raw_response.create(
        model="auto", input="Say hi", instructions="Be terse.", max_output_tokens=50, temperature=0.3
    )
    r = raw.parse()

    assert r.id.startswith("resp_") and r.object == "response" and r.status == "completed"
    assert r.model == "auto"  # the client's model string, echoed
    assert r.output_text == "Hi there, human."
    [item] = r.output
    assert item.type == "message" and item.id.startswith("msg_") and item.role == "assistant"
    assert item.content[0].type == "output_text" and item.content[0].text == "Hi there, human."
    assert r.usage is not None and r.usage.input_tokens > 0 and r.usage.output_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.instructions == "Be terse." and r.max_output_tokens == 50 and r.store is True
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert raw.headers["x-request-id"]
    [req] = upstream(sim_control, a)
    assert req["body"]["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Say hi"},
    ]
    assert req["body"]["max_tokens"] == 50 and req["body"]["temperature"] == 0.3
    assert req["body"]["stream"] is False


def test_stream_helper_final_response_has_the_streamed_ids(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"reasoning": "Thinking hard.", "text": "The answer is 42.", "chunks": 3})
    client = sdk(gw)

    with client.responses.stream(model=MODEL, input="What is the answer?") as stream:
        events = list(stream)
        final = stream.get_final_response()

    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    seqs = [e.sequence_number for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] == 0
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "The answer is 42."
    added = [e.item.id for e in events if e.type == "response.output_item.added"]
    assert [o.id for o in final.output] == added
    assert [o.type for o in final.output] == ["reasoning", "message"]
    assert final.output_text == "The answer is 42."
    assert final.model == MODEL
    created = next(e for e in events if e.type == "response.created")
    assert created.response.id == final.id

    stored = client.responses.retrieve(final.id)
    assert stored.id == final.id
    assert [o.id for o in stored.output] == added
    assert stored.output_text == "The answer is 42."


def test_stream_wire_format(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "abc def", "chunks": 2})

    out = post_raw(gw, {"model": "auto", "input": "x", "stream": True})

    assert out.status == 200 and out.headers["content-type"].startswith("text/event-stream")
    assert out.other_lines == []  # no comments, no [DONE]
    assert [e["sequence_number"] for e in out.events] == list(range(len(out.events)))
    assert out.types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert out.events[3]["part"] == {"type": "output_text", "text": "", "annotations": []}
    done_item = out.events[8]["item"]
    assert out.events[-1]["response"]["output"] == [done_item]
    assert out.events[-1]["response"]["status"] == "completed"


def test_length_finish_is_incomplete(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Once upon a time", "finish_reason": "length"})
    r = sdk(gw).responses.create(model="auto", input="story", max_output_tokens=4)
    assert r.status == "incomplete"
    assert r.incomplete_details is not None and r.incomplete_details.reason == "max_output_tokens"
    assert r.output_text == "Once upon a time"

    sim_control.script(a, {"text": "Once upon a time", "finish_reason": "length"})
    out = post_raw(gw, {"input": "story", "stream": True, "max_output_tokens": 4})
    assert out.types[-1] == "response.incomplete"
    assert out.events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


# -- tools ----------------------------------------------------------------------------------------------


def test_tool_call_round_trip(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    client = sdk(gw)
    sim_control.script(
        a, {"tool_calls": [{"id": "call_sim_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]}
    )

    tools: Any = [WEATHER_TOOL, {"type": "web_search"}]
    with client.responses.stream(model="auto", input="Weather in Paris?", tools=tools) as stream:
        events = list(stream)
        first = stream.get_final_response()

    [call] = first.output
    assert call.type == "function_call" and call.id is not None and call.id.startswith("fc_")
    assert call.call_id == "call_sim_1" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert "response.function_call_arguments.delta" in [e.type for e in events]
    assert "response.function_call_arguments.done" in [e.type for e in events]
    assert first.output_text == ""

    sim_control.script(a, {"text": "It is sunny in Paris."})
    second = client.responses.create(
        model="auto",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'}],
        tools=tools,
    )
    assert second.output_text == "It is sunny in Paris."
    assert second.previous_response_id == first.id

    turn1, turn2 = upstream(sim_control, a)
    assert turn1["body"]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER_TOOL["parameters"],
                "strict": False,
            },
        }
    ]  # web_search is accepted and not forwarded
    assert turn2["body"]["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_sim_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_sim_1", "content": '{"sky": "sunny"}'},
    ]


def test_stateless_tool_round_trip_with_full_history(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """Codex with ``store: false`` resends every item (reasoning included) instead of chaining."""
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Done."})
    items: Any = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev rules"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": '{"cmd":["ls"]}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
    ]
    tools: Any = [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]
    r = sdk(gw).responses.create(model="auto", input=items, tools=tools, store=False, instructions="You are Codex.")
    assert r.output_text == "Done." and r.store is False
    [req] = upstream(sim_control, a)
    assert req["body"]["messages"] == [
        {"role": "system", "content": "You are Codex."},
        {"role": "system", "content": "dev rules"},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":["ls"]}'}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
    ]


def test_request_mapping_reaches_upstream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": '{"ok": true}'})
    raw = raw_request(
        gw,
        "POST",
        "/responses",
        json={
            "model": "auto",
            "input": "json please",
            "tools": [WEATHER_TOOL, {"type": "namespace", "name": "mcp", "tools": []}],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "reasoning": {"effort": "low", "summary": "auto"},
            "text": {"format": {"type": "json_schema", "name": "ok", "schema": {"type": "object"}, "strict": True}},
            "max_output_tokens": 64,
            "top_p": 0.5,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "k",
            "some_unknown_field": 1,
        },
    )
    assert raw.status_code == 200
    [req] = upstream(sim_control, a)
    body = req["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["reasoning_effort"] == "low"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "ok", "schema": {"type": "object"}, "strict": True},
    }
    assert body["max_tokens"] == 64 and body["top_p"] == 0.5
    for dropped in ("include", "prompt_cache_key", "some_unknown_field", "reasoning", "text", "input"):
        assert dropped not in body


# -- chaining ---------------------------------------------------------------------------------------------


def test_two_turn_chain_with_only_previous_response_id(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    client = sdk(gw)
    sim_control.script(a, {"text": "Your name is Ada."})
    first = client.responses.create(model="auto", input="My name is Ada. What is my name?", instructions="first rules")
    sim_control.script(a, {"text": "You told me: Ada."})
    second = client.responses.create(
        model="auto", input="And again?", previous_response_id=first.id, instructions="second rules"
    )
    assert second.output_text == "You told me: Ada."
    _, turn2 = upstream(sim_control, a)
    assert turn2["body"]["messages"] == [
        {"role": "system", "content": "second rules"},  # instructions are not carried over
        {"role": "user", "content": "My name is Ada. What is my name?"},
        {"role": "assistant", "content": "Your name is Ada."},
        {"role": "user", "content": "And again?"},
    ]

    # A third turn chains through both, streamed this time.
    sim_control.script(a, {"text": "Still Ada."})
    with client.responses.stream(model="auto", input="Once more.", previous_response_id=second.id) as stream:
        third = stream.get_final_response()
    assert third.previous_response_id == second.id
    turn3 = upstream(sim_control, a)[2]
    assert [m["content"] for m in turn3["body"]["messages"]] == [
        "My name is Ada. What is my name?",
        "Your name is Ada.",
        "And again?",
        "You told me: Ada.",
        "Once more.",
    ]


def test_chain_right_after_response_completed(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """A client that chains the moment it reads ``response.completed`` (before the stream closes)."""
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "first answer"})
    sim_control.script(a, {"text": "second answer"})
    with httpx.Client(timeout=20) as c1, c1.stream(
        "POST", f"{gw.v1}/responses", json={"input": "one", "stream": True}, headers=AUTH
    ) as resp:
        response_id = None
        for line in resp.iter_lines():
            if line.startswith("data: ") and '"response.completed"' in line:
                response_id = json.loads(line[6:])["response"]["id"]
                break
        assert response_id is not None
        second = sdk(gw).responses.create(input="two", previous_response_id=response_id, model="auto")
    assert second.output_text == "second answer"
    assert [m["content"] for m in upstream(sim_control, a)[1]["body"]["messages"]] == ["one", "first answer", "two"]


def test_chain_depth_is_capped(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway, extra={"surfaces": {"responses": {"max_chain_depth": 2}}})
    client = sdk(gw)
    prev = None
    for i in range(4):
        sim_control.script(a, {"text": f"a{i}"})
        prev = client.responses.create(model="auto", input=f"q{i}", previous_response_id=prev.id if prev else None)
    last = upstream(sim_control, a)[-1]
    assert [m["content"] for m in last["body"]["messages"]] == ["q1", "a1", "q2", "a2", "q3"]


# -- retrieve, delete, store: false, restart --------------------------------------------------------------


def test_get_and_delete_by_id(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    client = sdk(gw)
    sim_control.script(a, {"text": "keep me"})
    created = client.responses.create(model="auto", input="x", metadata={"session": "s1"})

    got = raw_request(gw, "GET", f"/responses/{created.id}")
    assert got.status_code == 200
    assert got.json() == created.model_dump(mode="json", exclude_unset=True)
    assert got.json()["metadata"] == {"session": "s1"}
    assert client.responses.retrieve(created.id).output_text == "keep me"

    deleted = raw_request(gw, "DELETE", f"/responses/{created.id}")
    assert deleted.status_code == 200
    assert deleted.json() == {"id": created.id, "object": "response", "deleted": True}

    with pytest.raises(openai.NotFoundError) as err:
        client.responses.retrieve(created.id)
    assert_responses_error({"error": err.value.body})  # the SDK keeps the inner error object
    gone = raw_request(gw, "GET", f"/responses/{created.id}")
    assert gone.status_code == 404
    assert_responses_error(gone.json(), param=None)
    again = raw_request(gw, "DELETE", f"/responses/{created.id}")
    assert again.status_code == 404
    assert_responses_error(again.json())
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(created.id)


def test_store_false_is_not_retrievable(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    client = sdk(gw)
    sim_control.script(a, {"text": "ephemeral"})
    r = client.responses.create(model="auto", input="x", store=False)
    assert r.store is False and r.output_text == "ephemeral"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model="auto", input="y", previous_response_id=r.id)
    assert err.value.code == "previous_response_not_found"
    assert err.value.param == "previous_response_id"

    sim_control.script(a, {"text": "ephemeral stream"})
    with client.responses.stream(model="auto", input="x", store=False) as stream:
        final = stream.get_final_response()
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(final.id)


def test_stored_responses_survive_a_restart(
    servers_loop: BackgroundLoop, sim: SimServer, sim_control: SimControl, tmp_path: Path
) -> None:
    a = unique("alpha")
    data_dir = tmp_path / "data"

    def start() -> GatewayServer:
        return start_gateway(servers_loop, gateway_settings(data_dir, sim.base_url, {a: [MODEL]}))

    gw1 = start()
    try:
        sim_control.script(a, {"text": "remembered answer"})
        first = sdk(gw1).responses.create(model="auto", input="remember this")
    finally:
        gw1.close()  # a clean shutdown flushes the write-behind store

    gw2 = start()
    try:
        client = sdk(gw2)
        assert client.responses.retrieve(first.id).output_text == "remembered answer"
        sim_control.script(a, {"text": "yes"})
        client.responses.create(model="auto", input="do you remember?", previous_response_id=first.id)
        assert [m["content"] for m in upstream(sim_control, a)[-1]["body"]["messages"]] == [
            "remember this",
            "remembered answer",
            "do you remember?",
        ]
    finally:
        gw2.close()


# -- failover and errors after the commit point ------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "non-stream"])
def test_failure_before_first_token_fails_over_invisibly(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500, "error_message": "upstream exploded"})
    sim_control.script(b, {"text": "Answer from beta."})
    client = sdk(gw)

    raw = client.responses.with_raw_response.create(model="auto", input="hi", stream=stream)
    assert raw.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert raw.headers["x-fallback-attempts"] == "1"
    if stream:
        events = list(raw.parse())
        assert [e.type for e in events][:2] == ["response.created", "response.in_progress"]
        assert events[-1].type == "response.completed"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = events[-1].response
    else:
        final = raw.parse()
    assert final.status == "completed" and final.output_text == "Answer from beta."
    assert "exploded" not in final.model_dump_json()
    assert client.responses.retrieve(final.id).output_text == "Answer from beta."


def test_failure_after_first_token_is_response_failed(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "aaaabbbbccccdddd", "chunks": 4, "cut_after": 2})

    out = post_raw(gw, {"model": "auto", "input": "x", "stream": True})

    assert out.status == 200
    assert out.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert out.types[-1] == "response.failed" and out.types.count("response.failed") == 1
    assert "response.completed" not in out.types
    assert [e["sequence_number"] for e in out.events] == list(range(len(out.events)))
    assert "".join(e["delta"] for e in out.events if e["type"] == "response.output_text.delta") == "aaaabbbb"
    failed = out.events[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "stream_error" and "stream interrupted" in failed["error"]["message"]
    assert f"{a}-key-1" not in failed["error"]["message"]
    assert failed["output"][0]["status"] == "incomplete"
    assert upstream(sim_control, b) == []  # never switch models mid-stream
    # A failed response is not stored.
    assert raw_request(gw, "GET", f"/responses/{failed['id']}").status_code == 404

    # alpha now cools down after its failure: the next turn goes to beta, which fails the same way.
    sim_control.script(b, {"text": "aaaabbbbccccdddd", "chunks": 4, "cut_after": 2})
    with sdk(gw).responses.stream(model="auto", input="x") as stream:
        types = [e.type for e in stream]
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()
    assert types[-1] == "response.failed"


# -- bad input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "status", "param"),
    [
        ({"model": "auto"}, 400, "input"),
        ({"model": "auto", "input": 42}, 400, "input"),
        ({"model": "auto", "input": [{"role": "robot", "content": "x"}]}, 400, "input[0].role"),
        ({"model": "auto", "input": "x", "tools": "all"}, 400, "tools"),
        ({"model": "auto", "input": "x", "temperature": 9}, 400, "temperature"),
        ({"model": "auto", "input": "x", "stream": "yes"}, 400, "stream"),
        ({"model": "no-such-model", "input": "x"}, 400, "model"),
        ({"model": "auto", "input": "x", "tools": [{"type": "computer_use_preview"}]}, 422, "tools[0].type"),
        ([1, 2], 400, "body"),
    ],
)
def test_bad_input_is_4xx_in_the_responses_shape(
    make_gateway: MakeGateway, sim_control: SimControl, payload: Any, status: int, param: str
) -> None:
    gw, a = one_route(make_gateway)
    resp = raw_request(gw, "POST", "/responses", json=payload)
    assert resp.status_code == status
    assert_responses_error(resp.json(), param=param)
    assert upstream(sim_control, a) == []


def test_unknown_previous_response_id_is_404(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    resp = raw_request(gw, "POST", "/responses", json={"input": "x", "previous_response_id": "resp_nope", "stream": True})
    assert resp.status_code == 404
    assert_responses_error(resp.json(), param="previous_response_id", code="previous_response_not_found")
    with pytest.raises(openai.NotFoundError):
        sdk(gw).responses.create(model="auto", input="x", previous_response_id="resp_nope")
    assert upstream(sim_control, a) == []


def test_malformed_json_and_auth_errors_use_the_responses_shape(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    bad = raw_request(gw, "POST", "/responses", content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad.status_code == 400
    assert_responses_error(bad.json())
    unauth = httpx.post(f"{gw.v1}/responses", json={"input": "x"}, headers={"Authorization": "Bearer wrong"})
    assert unauth.status_code == 401
    assert_responses_error(unauth.json(), code="invalid_api_key")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gw.v1, api_key="wrong", max_retries=0).responses.create(model="auto", input="x")


def test_exhaustion_uses_the_responses_shape(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"status": 429, "retry_after": 30}, times=None)
    resp = raw_request(gw, "POST", "/responses", json={"input": "x", "stream": True})
    assert resp.status_code == 429
    body = resp.json()
    assert_responses_error(body)
    assert body["error"]["type"] == "rate_limit_error"
