"""Over the wire: a chat-completions client (the official ``openai`` SDK) through a gateway whose
providers are ``kind: gemini`` on the simulator's Gemini wire.

Checks what the client sees (text, streamed tool calls, reasoning, JSON mode, usage, invisible failover
between Gemini- and OpenAI-kind providers in both directions, the cooldown a RESOURCE_EXHAUSTED answer
leaves) and what the simulator received (the translated request, the key in ``x-goog-api-key``, the
``thoughtSignature`` put back on the second turn of a tool loop). The simulator checks every request the
way the Gemini API does (unknown fields, roles, schema keywords, function-call pairing, Gemini 3
signatures, …), so a request it answered is a valid one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from freellm.sim.gemini_wire import thought_signature_of
from tests.harness import BackgroundLoop, GatewayServer, unique
from tests.integration.helpers import (
    MakeMixed,
    answer_via_auto,
    body,
    ended,
    mixed_gateways,
    sdk,
    stream_raw,
    upstream,
)
from tests.integration.helpers import assert_failed_over_once as failed_over_once

MODEL = "gemini-3-flash-preview"
"""A Gemini 3 id: the simulator then insists on thought signatures, as Gemini 3 does."""


@pytest.fixture
def make_mixed_gateway(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> Iterator[MakeMixed]:
    """``make_mixed_gateway({"gem-1": "gemini", "oai-1": "openai"})``: a gateway whose chain is those
    providers (each serving ``model``, :data:`MODEL` by default) in order, all on the simulator."""
    with mixed_gateways(servers_loop, sim, tmp_path, MODEL) as factory:
        yield factory


def one_gemini(make: MakeMixed, **kwargs: Any) -> tuple[GatewayServer, str]:
    g = unique("gem")
    return make({g: "gemini"}, **kwargs), g


TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": ["string", "null"], "enum": ["c", "f", None], "default": "c"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


# -- text --------------------------------------------------------------------------------------------------


def test_stream_text_through_gemini_provider(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"text": "Bonjour from Gemini.", "chunks": 4})

    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(raw.parse())

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Bonjour from Gemini."
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "stop"
    ]
    assert {c.model for c in chunks} == {MODEL}
    usage = [c.usage for c in chunks if c.usage]
    assert len(usage) == 1 and usage[0].completion_tokens >= 1 and usage[0].prompt_tokens >= 1
    assert raw.headers["x-routed-via"] == f"{g}/{MODEL}"

    [record] = ended(sim_control, g)
    assert record["outcome"] == "completed" and record["status"] == 200 and record["stream"] is True
    assert record["key"] == f"{g}-key-1"  # sent as x-goog-api-key (the simulator reads only that header)
    assert record["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Answer in French."}]},
    }


def test_non_stream_text_usage_and_sampling(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, g = one_gemini(make_mixed_gateway, model="gemini-2.5-flash")
    sim_control.script(g, {"text": "Plain answer."})

    completion = sdk(gw).chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "hello there"}],
        max_tokens=50,
        temperature=1.5,
        top_p=0.8,
        seed=3,
        stop=["END"],
        frequency_penalty=0.2,
        logit_bias={"1": 1},
    )

    assert completion.choices[0].message.content == "Plain answer."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens >= 1
    [record] = ended(sim_control, g)
    assert record["stream"] is False
    assert record["body"]["generationConfig"] == {
        "temperature": 1.5,
        "topP": 0.8,
        "frequencyPenalty": 0.2,
        "seed": 3,
        "stopSequences": ["END"],
        "maxOutputTokens": 50,
    }


# -- tools -------------------------------------------------------------------------------------------------


def test_streamed_function_calls_reach_the_sdk_complete(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(
        g,
        {
            "text": "Checking.",
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}},
            ],
        },
    )

    with sdk(gw).chat.completions.stream(
        model="auto", messages=[{"role": "user", "content": "Weather in Paris and Rome?"}], tools=TOOLS
    ) as stream:
        final = stream.get_final_completion()

    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    calls: Any = message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome", "unit": "c"}),
    ]
    assert all(c.id.startswith("call_") for c in calls) and len({c.id for c in calls}) == 2
    [record] = ended(sim_control, g)
    assert record["body"]["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string", "description": "City name"},
                            "unit": {"type": "string", "enum": ["c", "f"], "nullable": True},
                        },
                        "required": ["city"],
                    },
                }
            ]
        }
    ]


def test_two_turn_tool_loop_puts_the_thought_signature_back(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Gemini 3 refuses the second turn of a tool loop without the signature the first turn gave; the
    client (an OpenAI SDK) never sees it, so the gateway must remember it and put it back."""
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(
        g,
        {
            "reasoning": "Need the weather.",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
    )
    sim_control.script(g, {"text": "It is cold in Oslo."})
    client = sdk(gw)
    messages: Any = [{"role": "user", "content": "Weather in Oslo?"}]

    first = client.chat.completions.create(
        model="auto", messages=messages, tools=TOOLS, reasoning_effort="low"
    )
    [call] = first.choices[0].message.tool_calls or []
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "-3C, snow"},
    ]
    second = client.chat.completions.create(model="auto", messages=messages, tools=TOOLS)

    assert second.choices[0].message.content == "It is cold in Oslo."
    one, two = ended(sim_control, g)
    assert one["body"]["generationConfig"]["thinkingConfig"] == {
        "thinkingLevel": "low",
        "includeThoughts": True,
    }
    assert two["outcome"] == "completed"  # the simulator checks Gemini 3's signature rule
    assert two["body"]["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Oslo?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                    "thoughtSignature": thought_signature_of("get_weather", '{"city": "Oslo"}'),
                }
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "-3C, snow"}}}],
        },
    ]


def test_signature_found_by_name_and_arguments_and_sentinel_as_last_resort(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}]})
    sim_control.script(g, {"text": "Done."}, times=2)
    client = sdk(gw)
    first = client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "Lima?"}], tools=TOOLS
    )
    [call] = first.choices[0].message.tool_calls or []

    def replay(call_id: str, arguments: str) -> dict[str, Any]:
        messages: Any = [
            {"role": "user", "content": "Lima?"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "mild"},
        ]
        client.chat.completions.create(model="auto", messages=messages, tools=TOOLS)
        part: dict[str, Any] = upstream(sim_control, g)[-1]["body"]["contents"][1]["parts"][0]
        return part

    assert json.loads(call.function.arguments) == {"city": "Lima"}  # type: ignore[union-attr]
    # A client that rewrote the call id (and the spacing of the arguments): found by name + arguments.
    rewritten = replay("client-side-id-1", '{ "city": "Lima" }')
    assert rewritten["thoughtSignature"] == thought_signature_of("get_weather", '{"city": "Lima"}')
    # History from another provider: no signature known, Google's documented sentinel.
    foreign = replay("call_from_elsewhere", '{"city": "Quito"}')
    assert foreign["thoughtSignature"] == "skip_thought_signature_validator"
    assert [r["outcome"] for r in ended(sim_control, g)] == ["completed"] * 3


# -- thinking and JSON mode --------------------------------------------------------------------------------


def test_thinking_streams_as_reasoning_before_the_text(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, g = one_gemini(make_mixed_gateway, model="gemini-2.5-flash")
    sim_control.script(g, {"reasoning": "Paris is in France, so...", "text": "Paris."})

    out = stream_raw(gw, body("Capital of France?", reasoning_effort="medium", max_tokens=100))

    assert out.status == 200 and out.errors == []
    assert out.reasoning == "Paris is in France, so..."
    assert out.text == "Paris."
    first_text = next(
        i for i, c in enumerate(out.chunks) if c["choices"] and c["choices"][0]["delta"].get("content")
    )
    assert any(
        c["choices"][0]["delta"].get("reasoning_content") for c in out.chunks[:first_text] if c["choices"]
    )
    [record] = ended(sim_control, g)
    assert record["body"]["generationConfig"] == {
        "maxOutputTokens": 100 + 8192,  # Gemini counts thoughts in maxOutputTokens
        "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True},
    }


def test_json_mode_with_a_schema(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"text": '{"name": "Ada", "age": 36}'})

    completion = sdk(gw).chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "A person as JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": "person",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                    "required": ["name", "age"],
                    "additionalProperties": False,
                },
            },
        },
    )

    assert json.loads(completion.choices[0].message.content or "") == {"name": "Ada", "age": 36}
    [record] = ended(sim_control, g)
    assert record["body"]["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        },
    }


def test_json_object_mode_and_no_json_mode_next_to_function_tools(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"text": '{"ok": true}'}, times=2)
    client = sdk(gw)

    plain = client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "JSON"}], response_format={"type": "json_object"}
    )
    with_tools = client.chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "JSON"}],
        response_format={"type": "json_object"},
        tools=TOOLS,
    )

    assert plain.choices[0].message.content == with_tools.choices[0].message.content == '{"ok": true}'
    first, second = ended(sim_control, g)
    assert first["body"]["generationConfig"] == {"responseMimeType": "application/json"}
    # Gemini refuses JSON mode with function calling: the request says it in words instead.
    assert "generationConfig" not in second["body"]
    assert "JSON" in second["body"]["systemInstruction"]["parts"][0]["text"]
    assert second["outcome"] == "completed"


# -- errors, cooldowns and failover ------------------------------------------------------------------------


def assert_failed_over_once(headers: Any, first: str, second: str, error_class: str) -> None:
    failed_over_once(headers, first, second, error_class, model=MODEL)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "non-stream"])
def test_gemini_failure_fails_over_to_openai_provider_invisibly(
    make_mixed_gateway: MakeMixed, sim_control: SimControl, stream: bool
) -> None:
    g, o = unique("gem"), unique("oai")
    gw = make_mixed_gateway({g: "gemini", o: "openai"})
    sim_control.script(
        g, {"status": 503, "error_message": "The model is overloaded. Please try again later."}
    )
    sim_control.script(o, {"text": "OpenAI-kind answer."})

    text, headers = answer_via_auto(gw, stream=stream)
    assert text == "OpenAI-kind answer."

    assert_failed_over_once(headers, g, o, "upstream_error")
    [first] = ended(sim_control, g)
    assert first["outcome"] == "error_status" and first["status"] == 503
    [second] = ended(sim_control, o)
    assert second["body"]["messages"] == [{"role": "user", "content": "Say hello." if stream else "hi"}]


def test_openai_failure_fails_over_to_gemini_provider_invisibly(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    o, g = unique("oai"), unique("gem")
    gw = make_mixed_gateway({o: "openai", g: "gemini"})
    sim_control.script(o, {"status": 429, "retry_after": 30})
    sim_control.script(g, {"text": "Gemini-kind answer.", "reasoning": "thinking it over"})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "Gemini-kind answer." and out.reasoning == "thinking it over"
    assert out.done_count == 1
    assert_failed_over_once(out.headers, o, g, "rate_limited")
    [second] = ended(sim_control, g)
    assert second["body"]["contents"] == [{"role": "user", "parts": [{"text": "Say hello."}]}]


@pytest.mark.parametrize(
    ("scenario", "error_class"),
    [
        ({"status": 429, "retry_after": 30, "error_message": "Resource has been exhausted"}, "rate_limited"),
        ({"status": 400, "error_message": "API key not valid. Please pass a valid API key."}, "auth"),
        (
            {"status": 404, "error_message": f"models/{MODEL} is not found for API version v1beta"},
            "model_not_found",
        ),
        (
            {"status": 400, "error_message": "* GenerateContentRequest.contents: something refused"},
            "provider_bad_request",
        ),
        ({"inband_error": "The model is overloaded.", "reasoning": "private thoughts"}, "upstream_error"),
        ({"empty": True}, "empty_completion"),
        ({"finish_reason": "content_filter", "empty": True}, "empty_completion"),
        ({"cut_after": 0, "reasoning": "private thoughts"}, "upstream_error"),
        (
            {"done": False, "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
            "upstream_error",
        ),
    ],
    ids=[
        "429",
        "400-key",
        "404",
        "400",
        "inband-error",
        "empty",
        "safety-empty",
        "cut-before-content",
        "calls-no-finish",
    ],
)
def test_gemini_failures_before_content_fail_over_invisibly(
    make_mixed_gateway: MakeMixed, sim_control: SimControl, scenario: dict[str, Any], error_class: str
) -> None:
    a, b = unique("gem"), unique("gem")
    gw = make_mixed_gateway({a: "gemini", b: "gemini"})
    sim_control.script(a, scenario)
    sim_control.script(b, {"text": "Second route answers."})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "Second route answers."
    assert "private thoughts" not in "".join(out.data)
    assert_failed_over_once(out.headers, a, b, error_class)


def test_resource_exhausted_retry_delay_cools_the_key(
    make_mixed_gateway: MakeMixed, sim_control: SimControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini's 429 states its back-off only as RetryInfo.retryDelay in the body: it is the cooldown."""
    # The simulator listens on loopback, and a local upstream gets a short fixed cooldown that ignores
    # the retry hint; treat it as the remote provider it stands in for.
    monkeypatch.setattr("freellm.routing.catalog.is_local_base_url", lambda url: False)
    g, o = unique("gem"), unique("oai")
    gw = make_mixed_gateway({g: "gemini", o: "openai"})
    # 120 s: longer than the default cooldown (90 s), so the cooldown's length shows the hint was read.
    sim_control.script(
        g,
        {
            "status": 429,
            "retry_after": 120,
            "error_message": "Resource has been exhausted (e.g. check quota).",
        },
    )
    client = sdk(gw)
    before = time.time()

    first = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "one"}]
    )
    assert first.parse().choices[0].message.content == f"Hello from {o}/{MODEL}."
    assert_failed_over_once(first.headers, g, o, "rate_limited")

    cooldowns = gw.run(gw.state.store.active_cooldowns(time.time()))
    scopes = {scope: rec for scope, rec in cooldowns.items() if scope.startswith(f"{g}\x1f{MODEL}")}
    assert scopes, cooldowns
    assert all(before + 120 <= rec.until <= time.time() + 121 for rec in scopes.values())

    second = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "two"}]
    )
    assert second.headers["x-routed-via"] == f"{o}/{MODEL}" and "x-fallback-attempts" not in second.headers
    assert len(upstream(sim_control, g)) == 1  # the cooled key is not called again


def test_daily_quota_exhaustion_is_recognised(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    g, o = unique("gem"), unique("oai")
    gw = make_mixed_gateway({g: "gemini", o: "openai"})
    daily = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38s"},
            ],
        }
    }
    sim_control.script(g, {"status": 429, "error_body": daily})

    out = stream_raw(gw, body())

    assert out.text == f"Hello from {o}/{MODEL}."
    assert_failed_over_once(out.headers, g, o, "daily_quota_exhausted")


def test_all_gemini_routes_rate_limited_is_a_429(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"status": 429, "retry_after": 30})

    with pytest.raises(openai.RateLimitError) as info:
        sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}])

    assert info.value.response.headers.get("retry-after")


def test_failure_after_content_is_a_stream_error_not_a_retry(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    g, o = unique("gem"), unique("oai")
    gw = make_mixed_gateway({g: "gemini", o: "openai"})
    sim_control.script(
        g,
        {
            "text": "aaaabbbbcccc",
            "chunks": 3,
            "inband_error": "The model is overloaded.",
            "inband_error_after": 2,
        },
    )

    out = stream_raw(gw, body())

    assert out.text == "aaaabbbb"
    assert [e["type"] for e in out.errors] == ["stream_error"]
    assert out.data[-1] == "[DONE]"
    assert upstream(sim_control, o) == []


def test_stream_ending_without_finish_reason_after_content_is_a_stream_error(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Gemini streams have no end marker: the last chunk's finishReason is the only proof of a whole answer."""
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"text": "Half an ans", "done": False})

    out = stream_raw(gw, body())

    assert out.text == "Half an ans"
    assert [e["type"] for e in out.errors] == ["stream_error"]
    assert "stream ended unexpectedly" in out.errors[0]["message"]


def test_inline_tool_call_dialect_in_gemini_text_is_not_bypassed(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Gemini text goes through the same pump as every provider: a dialect marker is held, not shown."""
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(
        g, {"text": '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'}
    )

    out = stream_raw(gw, body("Weather?", tools=TOOLS))

    assert "<tool_call>" not in out.text


def test_malformed_frames_and_keepalives_are_ignored(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"text": "All there.", "malformed": True, "keepalive_comments": 2})

    out = stream_raw(gw, body())

    assert out.errors == [] and out.text == "All there." and out.other_lines == []
    assert [out.chunks[i]["choices"][0]["finish_reason"] for i in out.finish_positions] == ["stop"]


# -- the simulator's wire, as the official google-genai SDK sees it -----------------------------------------


def test_simulator_gemini_wire_satisfies_the_official_sdk(sim: SimServer, sim_control: SimControl) -> None:
    from google import genai
    from google.genai import errors, types

    p = unique("gem")
    client = genai.Client(
        api_key="AIza-sdk-key",
        http_options=types.HttpOptions(base_url=f"{sim.base_url}/{p}", api_version="v1beta", timeout=10_000),
    )
    scenario = {
        "reasoning": "Weighing it.",
        "text": "Let me look.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
    }
    sim_control.script(p, scenario, times=2)
    config = types.GenerateContentConfig(
        system_instruction="sys",
        tools=[
            types.Tool(
                function_declarations=[
                    types.FunctionDeclaration(
                        name="get_weather",
                        parameters=types.Schema(
                            type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}
                        ),
                    )
                ]
            )
        ],
        thinking_config=types.ThinkingConfig(include_thoughts=True),
    )

    created = client.models.generate_content(model="gemini-2.5-flash", contents="Weather?", config=config)
    streamed = list(
        client.models.generate_content_stream(model="gemini-2.5-flash", contents="Weather?", config=config)
    )

    parts: Any = created.candidates[0].content.parts  # type: ignore[index,union-attr]
    assert [(bool(p.thought), p.text) for p in parts if p.text] == [
        (True, "Weighing it."),
        (False, "Let me look."),
    ]
    [call] = created.function_calls or []
    assert (call.name, call.args) == ("get_weather", {"city": "Paris"})
    assert created.candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    assert created.usage_metadata is not None and created.usage_metadata.thoughts_token_count
    assert "".join(c.text or "" for c in streamed) == "Let me look."
    assert [c.name for s in streamed for c in s.function_calls or []] == ["get_weather"]
    assert streamed[-1].candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    records = upstream(sim_control, p)
    assert [(r["key"], r["stream"]) for r in records] == [("AIza-sdk-key", False), ("AIza-sdk-key", True)]

    sim_control.script(p, {"status": 429, "retry_after": 7, "error_message": "Resource has been exhausted"})
    with pytest.raises(errors.ClientError) as info:
        client.models.generate_content(model="gemini-2.5-flash", contents="x")
    assert info.value.code == 429 and info.value.status == "RESOURCE_EXHAUSTED"


# -- signed reasoning: thought parts with their thoughtSignature -------------------------------------------


def test_thought_signature_is_captured_and_sent_back_as_a_signed_thought_part(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Turn 1: the last thought part carries a thoughtSignature → the chat stream's reasoning_signature
    delta and the non-stream message's reasoning_signature. Turn 2 (the assistant message sent back as
    the SDK returned it, reasoning_content + reasoning_signature included, as the session stage would
    put them): the model turn starts with a thought part carrying that signature, and the function call
    keeps its own remembered signature."""
    gw, g = one_gemini(make_mixed_gateway)
    scenario: Any = {
        "reasoning": "Need the weather.",
        "reasoning_signature": "VEhPVUdIVC1TSUc=",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
    }
    sim_control.script(g, scenario, times=2)
    messages: Any = [{"role": "user", "content": "Weather in Oslo?"}]

    out = stream_raw(gw, {"model": "auto", "stream": True, "messages": messages, "tools": TOOLS, "reasoning_effort": "low"})
    assert out.status == 200 and out.errors == [] and out.reasoning == "Need the weather."
    signatures = [
        c["choices"][0]["delta"]["reasoning_signature"]
        for c in out.chunks
        if c.get("choices") and "reasoning_signature" in c["choices"][0]["delta"]
    ]
    assert signatures == ["VEhPVUdIVC1TSUc="]

    client = sdk(gw)
    first = client.chat.completions.create(model="auto", messages=messages, tools=TOOLS, reasoning_effort="low")
    message = first.choices[0].message.model_dump(exclude_none=True)
    assert message["reasoning_content"] == "Need the weather."
    assert message["reasoning_signature"] == "VEhPVUdIVC1TSUc="

    sim_control.script(g, {"text": "It is cold in Oslo."})
    [call] = first.choices[0].message.tool_calls or []
    messages += [message, {"role": "tool", "tool_call_id": call.id, "content": "-3C, snow"}]
    second = client.chat.completions.create(model="auto", messages=messages, tools=TOOLS, reasoning_effort="low")

    assert second.choices[0].message.content == "It is cold in Oslo."
    records = ended(sim_control, g)
    assert records[-1]["outcome"] == "completed"
    assert records[-1]["body"]["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": "Need the weather.", "thought": True, "thoughtSignature": "VEhPVUdIVC1TSUc="},
            {
                "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                "thoughtSignature": thought_signature_of("get_weather", '{"city": "Oslo"}'),
            },
        ],
    }


def test_unsigned_reasoning_is_not_sent_to_gemini(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, g = one_gemini(make_mixed_gateway)
    sim_control.script(g, {"text": "Fine."})
    messages: Any = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello.", "reasoning_content": "Greet back."},
        {"role": "user", "content": "How are you?"},
    ]

    assert sdk(gw).chat.completions.create(model="auto", messages=messages).choices[0].message.content == "Fine."
    [record] = ended(sim_control, g)
    assert record["body"]["contents"][1] == {"role": "model", "parts": [{"text": "Hello."}]}
