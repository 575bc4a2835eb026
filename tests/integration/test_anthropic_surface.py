"""Over the wire: the Anthropic Messages surface with the official ``anthropic`` SDK against a real
gateway in front of the simulator.

Each test starts a fresh gateway with its own provider names, scripts the simulator, drives the gateway as
Claude Code / the SDK would, and checks both what the client saw and the translated OpenAI body the
simulator received. Raw frames are read with plain HTTP where the SDK would hide them (event lines, the
in-band ``error`` event).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2 as httpx
import pytest

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import MakeGateway, anthropic_sdk, one_route, received, two_routes

MODEL = "model-x"
HEADERS = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}


@dataclass
class RawEvents:
    status: int
    headers: httpx.Headers
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)
    json_body: Any = None

    @property
    def names(self) -> list[str]:
        return [e for e, _ in self.events]


def post_raw(
    gw: GatewayServer, payload: Any, *, path: str = "/v1/messages", headers: dict[str, str] | None = None
) -> RawEvents:
    """POST and read the answer line by line: SSE events as (event, data) pairs, or the JSON error body."""
    kwargs: dict[str, Any] = {"content": payload} if isinstance(payload, (bytes, str)) else {"json": payload}
    with (
        httpx.Client(timeout=15.0) as h,
        h.stream("POST", f"{gw.base_url}{path}", headers={**HEADERS, **(headers or {})}, **kwargs) as resp,
    ):
        out = RawEvents(status=resp.status_code, headers=resp.headers)
        if not resp.headers.get("content-type", "").startswith("text/event-stream"):
            resp.read()
            out.json_body = resp.json()
            return out
        event: str | None = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                assert event is not None, "a data line without an event line"
                out.events.append((event, json.loads(line[len("data: ") :])))
                event = None
            elif line.strip():
                out.other_lines.append(line)
    return out


def assert_anthropic_error(body: Any, kind: str) -> dict[str, Any]:
    assert body["type"] == "error"
    assert body["error"]["type"] == kind
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    err: dict[str, Any] = body["error"]
    return err


# ---- messages.create -----------------------------------------------------------------------------------


def test_create_with_x_api_key_translates_the_request_and_echoes_the_model(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Bonjour!", "chunks": 2})

    msg = anthropic_sdk(gw).messages.create(
        model="claude-sonnet-4-5-20250929",
        max_tokens=300,
        system=[
            {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Answer in French."},
        ],
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "Say hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        stop_sequences=["\n\nHuman:", "STOP"],
        metadata={"user_id": "u-1"},
        extra_body={"temperature": 0.2, "top_k": 5},
    )

    assert msg.type == "message" and msg.role == "assistant"
    assert msg.id.startswith("msg_")
    assert msg.model == "claude-sonnet-4-5-20250929"  # the client's string, echoed
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == "Bonjour!"  # type: ignore[union-attr]
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0

    [body] = received(sim_control, a)
    assert body["model"] == MODEL  # sonnet → default map → auto → the only route
    assert body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "You are terse.\nAnswer in French."},
        {"role": "user", "content": "Say hi"},
    ]
    assert body["stop"] == ["\n\nHuman:", "STOP"]  # forwarded, not dropped
    assert body["max_tokens"] == 300 and body["temperature"] == 0.2 and body["top_k"] == 5
    assert "metadata" not in body and "system" not in body and "stop_sequences" not in body


def test_create_with_bearer_auth_token_and_beta_query(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Hi."})
    # The beta resource posts to /v1/messages?beta=true with an anthropic-beta header.
    msg = anthropic_sdk(gw, bearer=True).beta.messages.create(
        model="claude-opus-4-1",
        max_tokens=50,
        messages=[{"role": "user", "content": "hi"}],
        betas=["interleaved-thinking-2025-05-14"],
    )
    assert msg.content[0].text == "Hi."  # type: ignore[union-attr]
    assert msg.model == "claude-opus-4-1"


def test_wrong_key_is_401_in_anthropic_envelope(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    bad = anthropic.Anthropic(base_url=gw.base_url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as info:
        bad.messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 401
    assert_anthropic_error(info.value.body, "authentication_error")


# ---- streaming ------------------------------------------------------------------------------------------


def test_stream_helper_final_message_with_thinking(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a, {"reasoning": "The user wants a greeting.", "text": "Hello there, friend.", "chunks": 3}
    )

    with anthropic_sdk(gw).messages.stream(
        model="claude-opus-4-7",
        max_tokens=4000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "greet me"}],
    ) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_message()

    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "The user wants a greeting."  # type: ignore[union-attr]
    assert final.content[0].signature == ""  # type: ignore[union-attr]
    assert final.content[1].text == "Hello there, friend."  # type: ignore[union-attr]
    assert final.model == "claude-opus-4-7" and final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0
    assert types[0] == "message_start" and types[-1] == "message_stop"

    [body] = received(sim_control, a)
    assert body["stream"] is True and body["reasoning_effort"] == "low"


def test_raw_stream_has_event_lines_and_the_exact_sequence(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "abcdef", "chunks": 3})
    raw = post_raw(
        gw,
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 20,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        },
        path="/v1/messages?beta=true",
        headers={"anthropic-beta": "whatever-2099-01-01"},
    )
    assert raw.status == 200 and raw.headers["content-type"].startswith("text/event-stream")
    assert raw.other_lines == []
    assert raw.names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in raw.events)
    start = raw.events[0][1]["message"]
    assert start["content"] == [] and start["model"] == "claude-haiku-4-5" and start["stop_reason"] is None
    assert set(start["usage"]) >= {"input_tokens", "output_tokens"}
    assert raw.events[1][1]["content_block"] == {"type": "text", "text": ""}
    assert "".join(d["delta"]["text"] for n, d in raw.events if n == "content_block_delta") == "abcdef"
    delta = raw.events[-2][1]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] > 0


# ---- tools -----------------------------------------------------------------------------------------------

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_tool_use_round_trip(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a,
        {
            "tool_calls": [{"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}],
            "tool_fragments": 3,
        },
    )
    sim_control.script(a, {"text": "It is 18C in Paris."})
    c = anthropic_sdk(gw)
    tools: list[Any] = [WEATHER_TOOL, {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]
    first_messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]

    with c.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=200,
        tools=tools,
        tool_choice={"type": "auto"},
        messages=first_messages,
    ) as stream:
        first = stream.get_final_message()

    assert first.stop_reason == "tool_use"
    [tool_use] = [b for b in first.content if b.type == "tool_use"]
    assert tool_use.id == "call_w1" and tool_use.name == "get_weather"  # type: ignore[union-attr]
    assert tool_use.input == {"city": "Paris"}  # type: ignore[union-attr]

    second = c.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=200,
        tools=tools,
        messages=[
            *first_messages,
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},  # type: ignore[misc]
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Thanks, summarise."},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_w1",
                        "content": [{"type": "text", "text": "18C"}],
                    },
                ],
            },
        ],
    )
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "It is 18C in Paris."  # type: ignore[union-attr]

    up1, up2 = received(sim_control, a)
    assert up1["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": WEATHER_TOOL["input_schema"],
                "description": "Current weather for a city",
            },
        }
    ]  # the server tool is not forwarded
    assert up1["tool_choice"] == "auto"
    assert up2["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": "18C"},  # before the user text
        {"role": "user", "content": "Thanks, summarise."},
    ]


def test_tool_only_stream_raw_blocks(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a,
        {
            "tool_calls": [
                {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
                {"id": "call_2", "name": "get_weather", "arguments": '{"city": "Rome"}'},
            ]
        },
    )
    raw = post_raw(
        gw,
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "stream": True,
            "tools": [WEATHER_TOOL],
            "messages": [{"role": "user", "content": "both cities"}],
        },
    )
    starts = [d for n, d in raw.events if n == "content_block_start"]
    assert [s["content_block"] for s in starts] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}},
        {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {}},
    ]
    deltas = [d["delta"] for n, d in raw.events if n == "content_block_delta"]
    assert deltas == [
        {"type": "input_json_delta", "partial_json": '{"city":"Oslo"}'},
        {"type": "input_json_delta", "partial_json": '{"city":"Rome"}'},
    ]
    assert raw.events[-2][1]["delta"]["stop_reason"] == "tool_use"


# ---- count_tokens ----------------------------------------------------------------------------------------


def test_count_tokens(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    text = "x" * 400
    result = anthropic_sdk(gw).messages.count_tokens(
        model="claude-sonnet-4-5", system="s" * 40, messages=[{"role": "user", "content": text}]
    )
    assert result.input_tokens == 100 + 10
    assert received(sim_control, a) == []  # counting never calls an upstream

    bearer = anthropic_sdk(gw, bearer=True).messages.count_tokens(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "abcd"}]
    )
    assert bearer.input_tokens == 1


def test_count_tokens_bad_input_and_pdf(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    raw = post_raw(gw, {"model": "claude-sonnet-4-5"}, path="/v1/messages/count_tokens")
    assert raw.status == 400
    assert (
        "messages: Field required"
        in assert_anthropic_error(raw.json_body, "invalid_request_error")["message"]
    )
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
    }
    raw = post_raw(gw, {"messages": [{"role": "user", "content": [pdf]}]}, path="/v1/messages/count_tokens")
    assert raw.status == 400
    assert "PDF" in assert_anthropic_error(raw.json_body, "invalid_request_error")["message"]


# ---- failover ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_failure_before_first_token_is_invisible(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500, "error_message": "upstream exploded"})
    sim_control.script(b, {"reasoning": "hmm", "text": "From the second route.", "chunks": 3})
    c = anthropic_sdk(gw)
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
    }

    if stream:
        with c.messages.stream(**request) as s:
            events = [e.type for e in s]
            final = s.get_final_message()
            headers = s.response.headers
        assert "error" not in events
    else:
        raw = c.messages.with_raw_response.create(**request)
        final, headers = raw.parse(), raw.headers
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[1].text == "From the second route."  # type: ignore[union-attr]
    assert headers["x-routed-via"] == f"{b}/{MODEL}"
    assert headers["x-fallback-attempts"] == "1"
    [failed] = sim_control.requests(provider=a)
    assert failed["status"] == 500 and failed["body"]["stream"] is stream


CUT = {"text": "Once upon a time there was", "chunks": 5, "cut_after": 2}
STORY: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "story"}],
}


def test_failure_after_first_token_is_an_sse_error_event(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, CUT)

    raw = post_raw(gw, {**STORY, "stream": True})
    assert raw.status == 200
    assert raw.names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "error",
    ]  # the stream ends at the error: no block stop, no message_delta, no message_stop
    err = raw.events[-1][1]
    assert err["type"] == "error" and err["error"]["type"] == "api_error"
    assert a in err["error"]["message"] and "stream interrupted" in err["error"]["message"]
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert received(sim_control, b) == []  # no failover after the commit point


def test_failure_after_first_token_raises_in_the_sdk(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, CUT)
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as info, anthropic_sdk(gw).messages.stream(**STORY) as stream:
        for event in stream:
            seen.append(event.type)
    assert seen[0] == "message_start" and "message_stop" not in seen
    assert_anthropic_error(info.value.body, "api_error")
    assert received(sim_control, b) == []


def test_exhaustion_keeps_the_ladder_status_in_anthropic_envelope(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"status": 429, "retry_after": 30}, times=None)
    with pytest.raises(anthropic.RateLimitError) as info:
        anthropic_sdk(gw).messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 429
    err = assert_anthropic_error(info.value.body, "rate_limit_error")
    assert err["code"] == "rate_limit_exceeded"
    assert int(info.value.response.headers["retry-after"]) >= 1


# ---- bad input --------------------------------------------------------------------------------------------

PDF = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"},
}


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({"model": "claude-sonnet-4-5", "max_tokens": 10}, "messages: Field required"),
        ({"model": "claude-sonnet-4-5", "messages": "hi"}, "messages: Input should be an array"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages.0.content:"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": ["x"]}]}]},
            "messages.0.content.0.text",
        ),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"}, "max_tokens:"),
        (
            {"messages": [{"role": "user", "content": [PDF, {"type": "text", "text": "summarise"}]}]},
            "PDF documents",
        ),
        (b"{not json", "Malformed JSON"),
        (b"", "empty"),
        ([1, 2, 3], "body: Input should be a JSON object"),
    ],
)
def test_bad_input_is_400_in_anthropic_envelope(
    make_gateway: MakeGateway, sim_control: SimControl, payload: Any, needle: str
) -> None:
    gw, a = one_route(make_gateway)
    raw = post_raw(gw, payload)
    assert raw.status == 400
    err = assert_anthropic_error(raw.json_body, "invalid_request_error")
    assert needle in err["message"]
    assert received(sim_control, a) == []  # refused before routing


def test_bad_input_through_the_sdk(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    with pytest.raises(anthropic.BadRequestError) as info:
        anthropic_sdk(gw).messages.create(
            model="claude-sonnet-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": [PDF]}],  # type: ignore[list-item]
        )
    assert info.value.status_code == 400
    assert_anthropic_error(info.value.body, "invalid_request_error")


def test_wrong_method_is_405_in_anthropic_envelope(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    with httpx.Client() as h:
        resp = h.get(f"{gw.base_url}/v1/messages", headers=HEADERS)
    assert resp.status_code == 405
    assert resp.json()["type"] == "error"


# ---- models ----------------------------------------------------------------------------------------------


def test_claude_names_never_404_and_follow_the_model_map(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway(
        {a: [MODEL], b: ["big-model"]},
        extra={"surfaces": {"anthropic": {"model_map": {"opus": f"{b}/big-model", "default": "auto"}}}},
    )
    c = anthropic_sdk(gw)
    for name in (
        "claude-opus-4-7",
        "claude/big-model",
        "opusplan",
        "claude-3-7-sonnet-latest",
        "gpt-4o",
        "big-model",
    ):
        raw = c.messages.with_raw_response.create(
            model=name, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
        assert raw.parse().model == name
        expected = (
            f"{b}/big-model"
            if name in ("claude-opus-4-7", "claude/big-model", "big-model")
            else f"{a}/{MODEL}"
        )
        assert raw.headers["x-routed-via"] == expected, name


def test_models_list_in_anthropic_shape(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    page = anthropic_sdk(gw).models.list()
    ids = [m.id for m in page.data]
    assert ids == ["auto", "fusion", "claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5", MODEL]
    assert all(m.type == "model" and m.display_name for m in page.data)

    with httpx.Client() as h:
        body = h.get(f"{gw.base_url}/v1/models", headers=HEADERS).json()
        assert body["has_more"] is False
        assert body["first_id"] == "auto" and body["last_id"] == MODEL
        assert set(body["data"][0]) == {"type", "id", "display_name", "created_at"}
        openai_shape = h.get(
            f"{gw.base_url}/v1/models", headers={"Authorization": f"Bearer {CLIENT_KEY}"}
        ).json()
    assert openai_shape["object"] == "list"
