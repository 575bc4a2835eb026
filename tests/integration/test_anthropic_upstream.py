"""Over the wire: a chat-completions client (the official ``openai`` SDK) through a gateway whose
providers are ``kind: anthropic`` on the simulator's Anthropic wire.

Checks what the client sees (text, streamed tool calls, reasoning, usage, invisible failover between
Anthropic- and OpenAI-kind providers in both directions) and what the simulator received. The
simulator checks every ``/v1/messages`` request the way Anthropic does (unknown fields, roles, empty
text, tool_use/tool_result pairing, thinking budget, at most 4 cache breakpoints…), so a request it
answered is a valid one. The prompt-caching tests use the official ``anthropic`` SDK as the client: its
``cache_control`` markers must reach an Anthropic-kind upstream on the same blocks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import BackgroundLoop, GatewayServer, unique
from tests.integration.helpers import (
    MakeMixed,
    answer_via_auto,
    anthropic_sdk,
    body,
    ended,
    mixed_gateways,
    sdk,
    stream_raw,
    upstream,
)
from tests.integration.helpers import assert_failed_over_once as failed_over_once

MODEL = "claude-sonnet-4-5"


@pytest.fixture
def make_mixed_gateway(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> Iterator[MakeMixed]:
    """``make_mixed_gateway({"ant-1": "anthropic", "oai-1": "openai"})``: a gateway whose chain is those
    providers (each serving :data:`MODEL`) in order, each of the given kind, all on the simulator."""
    with mixed_gateways(servers_loop, sim, tmp_path, MODEL) as factory:
        yield factory


def one_anthropic(make: MakeMixed) -> tuple[GatewayServer, str]:
    a = unique("ant")
    return make({a: "anthropic"}), a


# -- text ------------------------------------------------------------------------------------------------


def test_stream_text_through_anthropic_provider(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"text": "Bonjour from Claude.", "chunks": 4})

    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(raw.parse())

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Bonjour from Claude."
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "stop"
    ]
    assert {c.model for c in chunks} == {MODEL}
    usage = [c.usage for c in chunks if c.usage]
    assert len(usage) == 1 and usage[0].completion_tokens >= 1 and usage[0].prompt_tokens >= 1
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"

    [record] = ended(sim_control, a)
    assert record["outcome"] == "completed" and record["status"] == 200
    assert record["key"] == f"{a}-key-1"  # sent as x-api-key (the simulator reads only that header)
    sent = record["body"]
    assert sent == {
        "model": MODEL,
        "system": "Answer in French.",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4096,
        "stream": True,
    }


def test_non_stream_text_and_usage(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"text": "Plain answer."})

    completion = sdk(gw).chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hello there"}], max_tokens=50, temperature=1.5
    )

    assert completion.choices[0].message.content == "Plain answer."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens >= 1
    [record] = ended(sim_control, a)
    assert record["stream"] is False
    assert record["body"]["max_tokens"] == 50
    assert record["body"]["temperature"] == 1.0  # clamped to Anthropic's range
    assert "stream" not in record["body"]


# -- tools -----------------------------------------------------------------------------------------------


TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def test_streamed_tool_calls_reach_the_sdk_complete(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(
        a,
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "toolu_01P"},
                {"name": "get_weather", "arguments": {"city": "Rome"}, "id": "toolu_01R"},
            ],
            "tool_fragments": 4,
        },
    )

    client = sdk(gw)
    with client.chat.completions.stream(
        model="auto",
        messages=[{"role": "user", "content": "Weather in Paris and Rome?"}],
        tools=TOOLS,
    ) as stream:
        final = stream.get_final_completion()

    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []] == [
        ("toolu_01P", "get_weather", {"city": "Paris"}),
        ("toolu_01R", "get_weather", {"city": "Rome"}),
    ]
    [record] = ended(sim_control, a)
    assert record["body"]["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": TOOLS[0]["function"]["parameters"],
        }
    ]


def test_tool_round_trip_sends_valid_anthropic_history(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Second turn of a tool loop: system top-level, tool_use in the assistant turn, tool_result blocks
    first in the next user turn, stop_sequences; the simulator (strict like Anthropic) accepts it."""
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"text": "It is 18C in Paris."})

    completion = sdk(gw).chat.completions.create(
        model="auto",
        messages=[
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc.1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc.1", "content": '{"temp_c": 18}'},
            {"role": "system", "content": "Be brief."},
        ],
        tools=TOOLS,
        stop=["END", "\n\nUser:"],
        max_tokens=300,
    )

    assert completion.choices[0].message.content == "It is 18C in Paris."
    [record] = ended(sim_control, a)
    assert record["outcome"] == "completed"
    sent = record["body"]
    assert sent["system"] == [
        {"type": "text", "text": "You are a weather bot."},
        {"type": "text", "text": "Be brief."},
    ]
    assert sent["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_abc_1", "name": "get_weather", "input": {"city": "Paris"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_abc_1", "content": '{"temp_c": 18}'}],
        },
    ]
    assert sent["stop_sequences"] == ["END", "\n\nUser:"]
    assert sent["max_tokens"] == 300
    assert "stop" not in sent and "tool_choice" not in sent


def test_non_stream_tool_call(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(
        a, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "toolu_9"}]}
    )

    completion = sdk(gw).chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "Oslo?"}],
        tools=TOOLS,
        tool_choice="required",
    )

    calls: Any = completion.choices[0].message.tool_calls or []
    [call] = calls
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "toolu_9",
        "get_weather",
        {"city": "Oslo"},
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    [record] = ended(sim_control, a)
    assert record["body"]["tool_choice"] == {"type": "any"}


# -- thinking ---------------------------------------------------------------------------------------------


def test_thinking_becomes_reasoning_and_effort_becomes_a_budget(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"reasoning": "Paris is in France, so...", "text": "Paris."})

    out = stream_raw(gw, body("Capital of France?", reasoning_effort="medium", temperature=0.2))

    assert out.status == 200 and out.errors == []
    assert out.reasoning == "Paris is in France, so..."
    assert out.text == "Paris."
    first_text = next(
        i for i, c in enumerate(out.chunks) if c["choices"] and c["choices"][0]["delta"].get("content")
    )
    assert any(
        c["choices"][0]["delta"].get("reasoning_content") for c in out.chunks[:first_text] if c["choices"]
    )
    [record] = ended(sim_control, a)
    sent = record["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert sent["max_tokens"] == 4096 + 8192  # the budget does not fit under the default: added on top
    assert "temperature" not in sent  # Anthropic refuses sampling changes with thinking


def test_non_stream_reasoning(make_mixed_gateway: MakeMixed, sim_control: SimControl) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"reasoning": "deliberating", "text": "Done."})

    completion = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "x"}], reasoning_effort="low"
    )

    message = json.loads(completion.text)["choices"][0]["message"]
    assert message["content"] == "Done."
    assert message.get("reasoning_content") == "deliberating"
    [record] = ended(sim_control, a)
    assert record["body"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}


# -- errors and failover ---------------------------------------------------------------------------------


def assert_failed_over_once(headers: Any, first: str, second: str, error_class: str) -> None:
    failed_over_once(headers, first, second, error_class, model=MODEL)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "non-stream"])
def test_anthropic_429_fails_over_to_openai_provider_invisibly(
    make_mixed_gateway: MakeMixed, sim_control: SimControl, stream: bool
) -> None:
    a, o = unique("ant"), unique("oai")
    gw = make_mixed_gateway({a: "anthropic", o: "openai"})
    sim_control.script(
        a,
        {
            "status": 429,
            "retry_after": 30,
            "error_message": "Number of requests has exceeded your rate limit",
        },
    )
    sim_control.script(o, {"text": "OpenAI-kind answer."})

    text, headers = answer_via_auto(gw, stream=stream)
    assert text == "OpenAI-kind answer."

    assert_failed_over_once(headers, a, o, "rate_limited")
    [first] = ended(sim_control, a)
    assert first["outcome"] == "error_status" and first["status"] == 429
    [second] = ended(sim_control, o)
    assert second["body"]["messages"] == [{"role": "user", "content": "Say hello." if stream else "hi"}]


def test_openai_429_fails_over_to_anthropic_provider_invisibly(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    o, a = unique("oai"), unique("ant")
    gw = make_mixed_gateway({o: "openai", a: "anthropic"})
    sim_control.script(o, {"status": 429, "retry_after": 30})
    sim_control.script(a, {"text": "Anthropic-kind answer.", "reasoning": "thinking it over"})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "Anthropic-kind answer." and out.reasoning == "thinking it over"
    assert out.done_count == 1
    assert_failed_over_once(out.headers, o, a, "rate_limited")
    [second] = ended(sim_control, a)
    assert second["body"]["messages"] == [{"role": "user", "content": "Say hello."}]


@pytest.mark.parametrize(
    ("scenario", "error_class"),
    [
        ({"status": 529, "error_message": "Overloaded"}, "upstream_error"),
        ({"status": 401, "error_message": "invalid x-api-key"}, "auth"),
        (
            {"status": 400, "error_message": "messages: something the provider refused"},
            "provider_bad_request",
        ),
        ({"inband_error": "Overloaded", "reasoning": "private thoughts"}, "upstream_error"),
        ({"empty": True}, "empty_completion"),
        ({"cut_after": 0, "reasoning": "private thoughts"}, "upstream_error"),
    ],
    ids=["529-overloaded", "401", "400", "inband-error-event", "empty", "cut-before-content"],
)
def test_anthropic_failures_before_content_fail_over_invisibly(
    make_mixed_gateway: MakeMixed, sim_control: SimControl, scenario: dict[str, Any], error_class: str
) -> None:
    a, b = unique("ant"), unique("ant")
    gw = make_mixed_gateway({a: "anthropic", b: "anthropic"})
    sim_control.script(a, scenario)
    sim_control.script(b, {"text": "Second route answers."})

    out = stream_raw(gw, body())

    assert out.status == 200 and out.errors == []
    assert out.text == "Second route answers."
    assert "private thoughts" not in "".join(out.data)
    assert_failed_over_once(out.headers, a, b, error_class)


def test_all_anthropic_routes_rate_limited_is_a_429(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"status": 429, "retry_after": 30})

    with pytest.raises(openai.RateLimitError) as info:
        sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}])

    assert info.value.response.headers.get("retry-after")


def test_failure_after_content_is_a_stream_error_not_a_retry(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    a, b = unique("ant"), unique("oai")
    gw = make_mixed_gateway({a: "anthropic", b: "openai"})
    sim_control.script(
        a, {"text": "aaaabbbbcccc", "chunks": 3, "inband_error": "Overloaded", "inband_error_after": 2}
    )

    out = stream_raw(gw, body())

    assert out.text == "aaaabbbb"
    assert [e["type"] for e in out.errors] == ["stream_error"]
    assert out.data[-1] == "[DONE]"
    assert upstream(sim_control, b) == []


def test_stream_without_message_stop_still_completes(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"text": "All there.", "done": False, "malformed": True})

    out = stream_raw(gw, body())

    assert out.errors == [] and out.text == "All there."
    assert [out.chunks[i]["choices"][0]["finish_reason"] for i in out.finish_positions] == ["stop"]


# -- the simulator's wire, as the official Anthropic SDK sees it -------------------------------------------

# -- prompt caching: an Anthropic client's cache_control markers -------------------------------------------


EPH: Any = {"type": "ephemeral"}
MARKED_SYSTEM: Any = [
    {"type": "text", "text": "You are terse."},
    {"type": "text", "text": "Long stable rules.", "cache_control": EPH},
]
MARKED_USER: Any = [
    {"type": "text", "text": "<reminder>context</reminder>"},
    {"type": "text", "text": "Say hi", "cache_control": EPH},
]
MARKED_TOOLS: Any = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "cache_control": EPH,
    }
]


def test_cache_control_from_an_anthropic_client_reaches_the_anthropic_upstream(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Anthropic SDK → /v1/messages → a ``kind: anthropic`` route: the markers arrive on the same
    blocks (the simulator checks the request as Anthropic does, at most 4 markers included)."""
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(a, {"text": "Hi."})

    msg = anthropic_sdk(gw).messages.create(
        model=MODEL,
        max_tokens=200,
        system=MARKED_SYSTEM,
        messages=[{"role": "user", "content": MARKED_USER}],
        tools=MARKED_TOOLS,
    )

    assert msg.content[0].text == "Hi."  # type: ignore[union-attr]
    [record] = ended(sim_control, a)
    assert record["outcome"] == "completed" and record["status"] == 200
    sent = record["body"]
    assert sent["system"] == MARKED_SYSTEM
    assert sent["messages"] == [{"role": "user", "content": MARKED_USER}]
    assert sent["tools"] == [{**MARKED_TOOLS[0]}]


def test_marked_stream_fails_over_from_openai_kind_without_markers_to_anthropic_kind_with_them(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """The same marked request on both kinds of upstream: the OpenAI-compatible one (not OpenRouter) gets
    the joined strings and no marker, the Anthropic one the marked blocks, tool loop included."""
    o, a = unique("oai"), unique("ant")
    gw = make_mixed_gateway({o: "openai", a: "anthropic"})
    sim_control.script(o, {"status": 429, "retry_after": 30})
    sim_control.script(a, {"text": "Sunny in Paris."})
    messages: Any = [
        {"role": "user", "content": MARKED_USER},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "cache_control": EPH}],
        },
    ]

    with anthropic_sdk(gw).messages.stream(
        model=MODEL, max_tokens=200, system=MARKED_SYSTEM, messages=messages, tools=MARKED_TOOLS
    ) as stream:
        final = stream.get_final_message()

    assert final.content[0].text == "Sunny in Paris."  # type: ignore[union-attr]
    [first] = ended(sim_control, o)
    assert first["status"] == 429
    assert "cache_control" not in json.dumps(first["body"])
    assert first["body"]["messages"] == [
        {"role": "system", "content": "You are terse.\nLong stable rules."},
        {"role": "user", "content": "<reminder>context</reminder>\nSay hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "toolu_1"},
    ]
    [second] = ended(sim_control, a)
    assert second["outcome"] == "completed"
    sent = second["body"]
    assert sent["system"] == MARKED_SYSTEM
    assert sent["messages"][0] == {"role": "user", "content": MARKED_USER}
    assert sent["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "sunny", "cache_control": EPH}],
            }
        ],
    }
    assert sent["tools"][0]["cache_control"] == EPH



def test_simulator_anthropic_wire_satisfies_the_official_sdk(sim: SimServer, sim_control: SimControl) -> None:
    import anthropic

    p = unique("ant")
    client = anthropic.Anthropic(base_url=f"{sim.base_url}/{p}", api_key="sk-ant-sdk", max_retries=0)
    sim_control.script(
        p,
        {
            "reasoning": "Weighing it.",
            "text": "Let me look.",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "toolu_01"}],
        },
        times=2,
    )
    tools: Any = [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    messages: Any = [{"role": "user", "content": "Weather?"}]

    with client.messages.stream(
        model=MODEL, max_tokens=3000, messages=messages, tools=tools, system="sys"
    ) as stream:
        streamed = stream.get_final_message()
    created = client.messages.create(model=MODEL, max_tokens=3000, messages=messages, tools=tools)

    for message in (streamed, created):
        assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
        assert message.content[0].thinking == "Weighing it."  # type: ignore[union-attr]
        assert message.content[1].text == "Let me look."  # type: ignore[union-attr]
        tool_use = message.content[2]
        assert (tool_use.id, tool_use.name, tool_use.input) == ("toolu_01", "get_weather", {"city": "Paris"})  # type: ignore[union-attr]
        assert message.stop_reason == "tool_use"
        assert message.usage.output_tokens >= 1
    assert [r["key"] for r in upstream(sim_control, p)] == ["sk-ant-sdk", "sk-ant-sdk"]

    sim_control.script(p, {"status": 529, "error_message": "Overloaded"})
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=messages)
    assert info.value.status_code == 529
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }

    sim_control.script(p, {"text": "partial answer", "inband_error": "Overloaded", "inband_error_after": 1})
    with (
        pytest.raises(anthropic.APIStatusError, match="Overloaded"),
        client.messages.stream(model=MODEL, max_tokens=10, messages=messages) as stream,
    ):
        stream.get_final_message()

    with pytest.raises(anthropic.BadRequestError, match="Extra inputs are not permitted"):
        client.messages.create(model=MODEL, max_tokens=10, messages=messages, extra_body={"n": 2})


# -- signed reasoning: turn 1 captures it, turn 2 sends it back --------------------------------------------


def _signature_deltas(out: Any) -> list[str]:
    return [
        c["choices"][0]["delta"]["reasoning_signature"]
        for c in out.chunks
        if c.get("choices") and "reasoning_signature" in c["choices"][0]["delta"]
    ]


def test_thinking_signature_is_captured_stream_and_non_stream(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """The thinking block's signature_delta becomes the canonical reasoning_signature: on the chat wire
    an extra delta field (never text) and an extra field of the non-stream message."""
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(
        a, {"reasoning": "Paris is in France.", "text": "Paris.", "reasoning_signature": "EqQBsig-1"}, times=2
    )

    out = stream_raw(gw, body("Capital of France?", reasoning_effort="low"))
    assert out.status == 200 and out.errors == []
    assert (out.reasoning, out.text) == ("Paris is in France.", "Paris.")
    assert _signature_deltas(out) == ["EqQBsig-1"]
    first_text = next(i for i, c in enumerate(out.chunks) if c["choices"] and c["choices"][0]["delta"].get("content"))
    signature_at = next(
        i for i, c in enumerate(out.chunks) if c["choices"] and "reasoning_signature" in c["choices"][0]["delta"]
    )
    assert signature_at < first_text  # it waited in the preamble with the reasoning

    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Capital of France?"}], reasoning_effort="low"
    )
    message = json.loads(raw.text)["choices"][0]["message"]
    assert message["content"] == "Paris."
    assert message["reasoning_content"] == "Paris is in France."
    assert message["reasoning_signature"] == "EqQBsig-1"


def test_signed_reasoning_goes_back_as_a_thinking_block_first_and_keeps_thinking_on_in_a_tool_loop(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Turn 1 through the Anthropic-kind route yields reasoning + signature; turn 2 (a chat client sending
    them back on the assistant message, as the session stage does) reaches the upstream as a signed
    thinking block before the tool_use, so thinking stays on while the tool loop continues (the
    simulator refuses a thinking-on tool loop whose assistant turn does not start with one, and a
    ``sim-sig-`` signature that does not match its text)."""
    gw, a = one_anthropic(make_mixed_gateway)
    sim_control.script(
        a,
        {"reasoning": "Need the weather.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
    )
    first = sdk(gw).chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=TOOLS,
        reasoning_effort="low",
    )
    turn1 = json.loads(first.text)["choices"][0]["message"]
    assert turn1["reasoning_content"] == "Need the weather."
    signature = turn1["reasoning_signature"]
    assert signature.startswith("sim-sig-")

    sim_control.script(a, {"text": "It is sunny in Oslo."})
    messages: Any = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": turn1["tool_calls"],
            "reasoning_content": turn1["reasoning_content"],
            "reasoning_signature": signature,
        },
        {"role": "tool", "tool_call_id": turn1["tool_calls"][0]["id"], "content": "sunny"},
    ]
    out = stream_raw(gw, {"model": "auto", "stream": True, "messages": messages, "tools": TOOLS, "reasoning_effort": "low"})
    assert out.status == 200 and out.errors == [] and out.text == "It is sunny in Oslo."

    records = ended(sim_control, a)
    assert [r["outcome"] for r in records] == ["completed", "completed"]
    sent = records[1]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assistant = sent["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Need the weather.", "signature": signature}
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]


def test_signed_reasoning_reaches_an_openai_kind_upstream_without_its_signature(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """The same turn-2 history on the OpenAI wire: reasoning_content as it is, reasoning_signature never."""
    o = unique("oai")
    gw = make_mixed_gateway({o: "openai"})
    sim_control.script(o, {"text": "It is sunny in Oslo."})
    messages: Any = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}],
            "reasoning_content": "Need the weather.",
            "reasoning_signature": "EqQBsig-1",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]

    completion = sdk(gw).chat.completions.create(model="auto", messages=messages, tools=TOOLS)

    assert completion.choices[0].message.content == "It is sunny in Oslo."
    [record] = ended(sim_control, o)
    assistant = record["body"]["messages"][1]
    assert assistant["reasoning_content"] == "Need the weather."
    assert "reasoning_signature" not in assistant and "thinking_blocks" not in assistant


def test_anthropic_client_gets_the_signature_and_its_thinking_block_reaches_the_upstream_unchanged(
    make_mixed_gateway: MakeMixed, sim_control: SimControl
) -> None:
    """Anthropic SDK → /v1/messages → a ``kind: anthropic`` route: the thinking block the client gets
    carries the upstream's signature (stream and non-stream); sent back in the next turn of a tool loop
    it arrives at the upstream as the same block, first in its turn, with thinking still on."""
    gw, a = one_anthropic(make_mixed_gateway)
    client = anthropic_sdk(gw)
    tools: Any = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    sim_control.script(
        a,
        {
            "reasoning": "Weigh the options.",
            "text": "Checking.",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "toolu_01"}],
        },
        times=2,
    )
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}
    question: Any = [{"role": "user", "content": "Weather in Oslo?"}]
    with client.messages.stream(model=MODEL, max_tokens=4000, messages=question, tools=tools, thinking=thinking) as stream:
        streamed = stream.get_final_message()
    created = client.messages.create(model=MODEL, max_tokens=4000, messages=question, tools=tools, thinking=thinking)
    from freellm.sim.anthropic_wire import signature_of

    for message in (streamed, created):
        assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
        block = message.content[0]
        assert block.thinking == "Weigh the options."  # type: ignore[union-attr]
        assert block.signature == signature_of("Weigh the options.")  # type: ignore[union-attr]

    sim_control.script(a, {"text": "Sunny."})
    history: Any = [
        *question,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in streamed.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny"}]},
    ]
    answer = client.messages.create(model=MODEL, max_tokens=4000, messages=history, tools=tools, thinking=thinking)

    assert answer.content[-1].text == "Sunny."  # type: ignore[union-attr]
    records = ended(sim_control, a)
    assert [r["outcome"] for r in records] == ["completed"] * 3
    sent = records[2]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Weigh the options.",
        "signature": signature_of("Weigh the options."),
    }
