"""Over the wire: tool calls that survive weak models, through a real gateway and the simulator.

A simulated provider answers with a tool call written as *text* in a model's own dialect (the simulator
streams any ``text``, so a dialect is just text in a scenario). The official SDKs — ``openai`` chat and
``responses``, ``anthropic`` messages — must see structured tool calls with ids, the tool-call stop
reason, and no dialect markup in any content delta. An unparseable dialect fails over to the next route
invisibly; string-encoded array arguments arrive repaired; Groq's ``failed_generation`` 400 becomes a
success; ``response_format`` replies are healed or failed over; ``<think>`` blocks become reasoning.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import pytest

from freellm.sim.control import SimControl
from tests.integration.helpers import (
    AUTH,
    MODEL,
    MakeGateway,
    anthropic_sdk,
    body,
    one_route,
    sdk,
    stream_raw,
    two_routes,
)

PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "paths": {"type": "array", "items": {"type": "string"}}},
    "required": ["city"],
}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": PARAMS}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather", "input_schema": PARAMS}
RESPONSES_TOOL = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": PARAMS, "strict": False}

ARGS = {"city": "Oslo"}
DIALECTS = {
    "kimi": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>'
    ),
    "deepseek": (
        "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function"
        '<\uff5ctool\u2581sep\uff5c>get_weather\n```json\n{"city": "Oslo"}\n```'
        "<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>"
    ),
    "function-tag": '<function=get_weather>{"city": "Oslo"}</function>',
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    "qwen-coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
    "bare-json": '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "bare-json-fenced": '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```',
}
MARKUP = ("<|", "<\uff5c", "<tool_call", "</tool_call", "<function", "</function", '"name"', "```")
BROKEN = '<tool_call>{"name": "get_weather", "arguments": {"city": "Os</tool_call>'


def assert_no_markup(text: str) -> None:
    for marker in MARKUP:
        assert marker not in text, f"dialect markup {marker!r} leaked into content: {text!r}"


def dialect_scenario(text: str) -> dict[str, Any]:
    return {"text": text, "chunks": 9}


# ---- chat completions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS.values(), ids=DIALECTS.keys())
def test_chat_stream_sdk_gets_a_structured_call_for_each_dialect(
    make_gateway: MakeGateway, sim_control: SimControl, dialect: str
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, dialect_scenario(dialect))

    content: list[str] = []
    with sdk(gw).chat.completions.stream(
        model="auto", messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=[CHAT_TOOL]  # type: ignore[list-item]
    ) as stream:
        for event in stream:
            if event.type == "content.delta":
                content.append(event.delta)
        final = stream.get_final_completion()

    assert_no_markup("".join(content))
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == ARGS
    assert not choice.message.content


@pytest.mark.parametrize("dialect", ["hermes", "kimi", "bare-json"])
def test_chat_raw_stream_has_no_markup_in_any_frame(
    make_gateway: MakeGateway, sim_control: SimControl, dialect: str
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, dialect_scenario(DIALECTS[dialect]))

    out = stream_raw(gw, body("Weather?", tools=[CHAT_TOOL]))

    assert out.status == 200 and out.errors == []
    assert_no_markup(out.text)
    calls = [c for ch in out.chunks if ch.get("choices") for c in ch["choices"][0]["delta"].get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    finishes = [ch["choices"][0]["finish_reason"] for ch in out.chunks if ch.get("choices") and ch["choices"][0]["finish_reason"]]
    assert finishes == ["tool_calls"]


def test_chat_non_stream_rescues_markup_after_prose(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Let me check.\n" + DIALECTS["function-tag"]})

    completion = sdk(gw).chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "Weather?"}], tools=[CHAT_TOOL]  # type: ignore[list-item]
    )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    [call] = choice.message.tool_calls or []
    assert call.id.startswith("call_") and json.loads(call.function.arguments) == ARGS


@pytest.mark.parametrize("stream", [True, False])
def test_unparseable_dialect_fails_over_to_the_next_route_invisibly(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, dialect_scenario(BROKEN))
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]})

    response = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Weather?"}], tools=[CHAT_TOOL], stream=stream  # type: ignore[list-item, call-overload]
    )
    assert response.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert response.headers["x-fallback-attempts"] == "1"
    parsed: Any = response.parse()
    if stream:
        chunks = list(parsed)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        names = [t.function.name for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    else:
        text = parsed.choices[0].message.content or ""
        names = [t.function.name for t in parsed.choices[0].message.tool_calls or []]
    assert_no_markup(text)
    assert names == ["get_weather"]


@pytest.mark.parametrize("stream", [True, False])
def test_string_encoded_array_arguments_arrive_repaired_on_chat(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a = one_route(make_gateway)
    args = json.dumps({"city": "Oslo", "paths": json.dumps(["a.py", "b.py"])})
    sim_control.script(a, {"tool_calls": [{"name": "get_weather", "arguments": args}], "tool_fragments": 5})

    if stream:
        with sdk(gw).chat.completions.stream(
            model="auto", messages=[{"role": "user", "content": "x"}], tools=[CHAT_TOOL]  # type: ignore[list-item]
        ) as s:
            final = s.get_final_completion()
        [call] = final.choices[0].message.tool_calls or []
    else:
        completion = sdk(gw).chat.completions.create(
            model="auto", messages=[{"role": "user", "content": "x"}], tools=[CHAT_TOOL]  # type: ignore[list-item]
        )
        [call] = completion.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "Oslo", "paths": ["a.py", "b.py"]}


def test_groq_failed_generation_400_becomes_a_tool_call(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    error = {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": '<function=get_weather{"city": "Oslo"}</function>',
        }
    }
    for stream in (True, False):
        sim_control.script(a, {"status": 400, "error_body": error})
        response = sdk(gw).chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "x"}], tools=[CHAT_TOOL], stream=stream  # type: ignore[list-item, call-overload]
        )
        assert response.headers["x-routed-via"] == f"{a}/{MODEL}"
        assert "x-fallback-attempts" not in response.headers
        parsed: Any = response.parse()
        if stream:
            chunks = list(parsed)
            calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
            finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            assert finish == ["tool_calls"]
        else:
            calls = parsed.choices[0].message.tool_calls
            assert parsed.choices[0].finish_reason == "tool_calls"
        [call] = calls
        assert call.id.startswith("call_") and json.loads(call.function.arguments) == ARGS


def test_invalid_arguments_fail_over_with_strict_validation(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway, extra={"tools": {"strict_validation": True}})
    sim_control.script(a, {"tool_calls": [{"name": "get_weather", "arguments": '{"town": "Oslo"}'}]})
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]})

    out = stream_raw(gw, body("Weather?", tools=[CHAT_TOOL]))

    assert out.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert out.headers["x-fallback-trail"] == f"{a}/{MODEL} key1=invalid_tool_arguments"
    calls = [c for ch in out.chunks if ch.get("choices") for c in ch["choices"][0]["delta"].get("tool_calls") or []]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [ARGS]


# ---- structured output and think tags ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_response_format_fenced_json_is_healed_and_prose_fails_over(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "The weather in Oslo is mild."})
    sim_control.script(b, {"text": 'Here you go:\n```json\n{"city": "Oslo"}\n```', "chunks": 5})

    response = sdk(gw).chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": "JSON please"}],
        response_format={"type": "json_object"},
        stream=stream,  # type: ignore[call-overload]
    )
    assert response.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert response.headers["x-fallback-trail"] == f"{a}/{MODEL} key1=format_ignored"
    parsed: Any = response.parse()
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
    else:
        text = parsed.choices[0].message.content
    assert json.loads(text) == {"city": "Oslo"}


def test_think_tags_become_reasoning_on_the_chat_stream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "<think>The user wants a greeting.</think>\n\nHello!", "chunks": 11})

    out = stream_raw(gw, body())

    assert out.text == "Hello!"
    assert out.reasoning == "The user wants a greeting."


# ---- Anthropic messages ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS.values(), ids=DIALECTS.keys())
def test_anthropic_stream_sdk_gets_tool_use_for_each_dialect(
    make_gateway: MakeGateway, sim_control: SimControl, dialect: str
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, dialect_scenario(dialect))

    texts: list[str] = []
    with anthropic_sdk(gw).messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=200,
        tools=[ANTHROPIC_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
    ) as stream:
        for event in stream:
            if event.type == "text":
                texts.append(event.text)
        message = stream.get_final_message()

    assert_no_markup("".join(texts))
    assert message.stop_reason == "tool_use"
    [tool_use] = [b for b in message.content if b.type == "tool_use"]
    assert tool_use.name == "get_weather" and tool_use.input == ARGS
    assert tool_use.id
    assert all(not (b.type == "text" and b.text) for b in message.content)


def test_anthropic_unparseable_dialect_fails_over_and_arrays_are_repaired(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, dialect_scenario(BROKEN))
    args = json.dumps({"city": "Oslo", "paths": json.dumps(["a.py"])})
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": args}]})

    raw = anthropic_sdk(gw).messages.with_raw_response.create(
        model="claude-sonnet-4-5",
        max_tokens=200,
        tools=[ANTHROPIC_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "Weather?"}],
    )
    assert raw.headers["x-routed-via"] == f"{b}/{MODEL}"
    message = raw.parse()
    assert message.stop_reason == "tool_use"
    [tool_use] = [blk for blk in message.content if blk.type == "tool_use"]
    assert tool_use.input == {"city": "Oslo", "paths": ["a.py"]}


def test_anthropic_think_tags_become_a_thinking_block(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "<think>hmm</think>Hi there.", "chunks": 6})

    with anthropic_sdk(gw).messages.stream(
        model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = stream.get_final_message()

    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "hmm"  # type: ignore[union-attr]
    assert message.content[1].text == "Hi there."  # type: ignore[union-attr]


# ---- Responses ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS.values(), ids=DIALECTS.keys())
def test_responses_stream_sdk_gets_a_function_call_for_each_dialect(
    make_gateway: MakeGateway, sim_control: SimControl, dialect: str
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, dialect_scenario(dialect))

    deltas: list[str] = []
    with sdk(gw).responses.stream(model="auto", input="Weather in Oslo?", tools=[RESPONSES_TOOL]) as stream:  # type: ignore[list-item]
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()

    assert_no_markup("".join(deltas))
    assert final.output_text == ""
    [item] = final.output
    assert item.type == "function_call"
    assert item.call_id.startswith("call_") and item.name == "get_weather"
    assert json.loads(item.arguments) == ARGS


def test_responses_unparseable_dialect_fails_over_and_arrays_are_repaired(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, dialect_scenario(BROKEN))
    args = json.dumps({"city": "Oslo", "paths": json.dumps(["a.py", "b.py"])})
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": args}], "tool_fragments": 4})

    with httpx.Client(timeout=15) as client:
        resp = client.post(
            f"{gw.v1}/responses",
            json={"model": "auto", "input": "Weather?", "tools": [RESPONSES_TOOL], "stream": False},
            headers=AUTH,
        )
    assert resp.status_code == 200
    assert resp.headers["x-routed-via"] == f"{b}/{MODEL}"
    [item] = resp.json()["output"]
    assert item["type"] == "function_call"
    assert json.loads(item["arguments"]) == {"city": "Oslo", "paths": ["a.py", "b.py"]}

    sim_control.script(a, dialect_scenario(BROKEN))
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": args}], "tool_fragments": 4})
    with sdk(gw).responses.stream(model="auto", input="Weather?", tools=[RESPONSES_TOOL]) as stream:  # type: ignore[list-item]
        final = stream.get_final_response()
    [item2] = final.output
    assert item2.type == "function_call" and json.loads(item2.arguments)["paths"] == ["a.py", "b.py"]
