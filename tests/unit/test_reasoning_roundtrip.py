"""Signed reasoning below the session stage: captured from each upstream wire, carried in the canonical
form (``reasoning_content`` + ``reasoning_signature`` on an assistant message, ``delta.reasoning_signature``
in a stream), and sent back the way each wire wants it.

* capture: the simulator's Anthropic and Gemini answers → the wire's translator → the pump's
  :class:`~freellm.engine.pump.PumpResult` (a signature is never text and never commits);
* send back: one canonical history → a signed ``thinking`` block first (Anthropic), a signed thought part
  first (Gemini), ``reasoning_content`` without the signature (OpenAI wire);
* inbound Anthropic clients: their signed / redacted thinking is kept as sent;
* the surfaces: Anthropic ``signature_delta`` / ``signature``, chat's extra field, nothing elsewhere;
* the simulator refuses what Anthropic refuses about thinking blocks.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from freellm.core.accumulate import completion_body
from freellm.core.request import parse_chat_request
from freellm.engine.context import TurnOutcome
from freellm.engine.pump import PumpResult, StreamPump
from freellm.providers.anthropic_wire import AnthropicStreamTranslator, message_to_chunks, to_messages_request
from freellm.providers.gemini_wire import GeminiStreamTranslator, to_gemini_request
from freellm.providers.openai_compat import without_signatures
from freellm.sim.anthropic_wire import ANTHROPIC_WIRE, signature_of
from freellm.sim.gemini_wire import GEMINI_SSE_WIRE
from freellm.sim.openai_wire import OPENAI_WIRE
from freellm.sim.plan import build_plan
from freellm.sim.scenario import ScenarioError, parse_scenario
from freellm.sim.wire import WireRequestError
from freellm.surfaces.anthropic.mapping import to_chat_request
from freellm.surfaces.anthropic.render import message_body
from freellm.surfaces.anthropic.wire import parse_messages_request
from freellm.surfaces.gemini_wire.render import GeminiStreamRenderer
from freellm.surfaces.openai_completions import CompletionsRenderer

SIGNATURE = "EqQBCkYIBxgCKkD-signed"


def _pump_all(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], PumpResult, list[bool]]:
    """Feed chunks one by one: what the pump released, its result, and ``committed`` after each."""
    pump = StreamPump("route-model")
    out: list[dict[str, Any]] = []
    committed: list[bool] = []
    for chunk in copy.deepcopy(chunks):
        out.extend(pump.feed(chunk))
        committed.append(pump.committed)
    out.extend(pump.finish(saw_done=True))
    return out, pump.result(), committed


def _text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


# ---- capture: upstream wire → canonical chunks → PumpResult ---------------------------------------------


def _anthropic_sim_events(scenario: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    sc = parse_scenario(scenario)
    view = ANTHROPIC_WIRE.parse_request(
        {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}, {}
    )
    plan = build_plan(sc, "p", "m", view.prompt_chars, "abcd1234")
    events = []
    for data, _ in ANTHROPIC_WIRE.render_stream(plan, sc, view, "msg_sim_1", 1700000000):
        name, _, rest = data.decode().partition("\n")
        events.append((name[len("event: ") :], json.loads(rest[len("data: ") :])))
    return events


def test_anthropic_stream_signature_reaches_the_pump_result_and_is_never_text() -> None:
    events = _anthropic_sim_events({"reasoning": "Think it through.", "text": "Answer."})
    translator = AnthropicStreamTranslator(created=1700000000)
    chunks = [c for name, data in events for c in translator.feed(name, data)]
    signature_chunks = [c for c in chunks if "reasoning_signature" in c["choices"][0]["delta"]]
    assert [c["choices"][0]["delta"] for c in signature_chunks] == [
        {"reasoning_signature": signature_of("Think it through.")}
    ]

    out, result, committed = _pump_all(chunks)
    first_text = next(i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("content"))
    assert not any(committed[:first_text])  # role, reasoning and signature all waited
    assert committed[first_text]
    assert (result.reasoning, result.text) == ("Think it through.", "Answer.")
    assert result.reasoning_signature == signature_of("Think it through.")
    assert signature_of("Think it through.") not in _text_of(out)


def test_anthropic_non_stream_signature_and_a_scripted_one() -> None:
    sc = parse_scenario({"reasoning": "r", "text": "t", "reasoning_signature": SIGNATURE})
    view = ANTHROPIC_WIRE.parse_request({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}, {})
    plan = build_plan(sc, "p", "m", view.prompt_chars, "abcd1234")
    body = ANTHROPIC_WIRE.render_completion(plan, sc, view, "msg_1", 1700000000)
    assert body["content"][0] == {"type": "thinking", "thinking": "r", "signature": SIGNATURE}
    _, result, _ = _pump_all(message_to_chunks(body, created=1700000000))
    assert (result.reasoning, result.reasoning_signature, result.text) == ("r", SIGNATURE, "t")


def test_two_signed_thinking_blocks_in_one_answer_leave_no_replayable_signature() -> None:
    translator = AnthropicStreamTranslator(created=1)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": {"id": "m", "model": "c"}})]
    for index, (text, sig) in enumerate((("one", "s1"), ("two", "s2"))):
        events += [
            ("content_block_start", {"index": index, "content_block": {"type": "thinking", "thinking": ""}}),
            ("content_block_delta", {"index": index, "delta": {"type": "thinking_delta", "thinking": text}}),
            ("content_block_delta", {"index": index, "delta": {"type": "signature_delta", "signature": sig}}),
            ("content_block_stop", {"index": index}),
        ]
    events += [
        ("content_block_start", {"index": 2, "content_block": {"type": "text", "text": "ok"}}),
        ("message_delta", {"delta": {"stop_reason": "end_turn"}}),
    ]
    chunks = [c for name, data in events for c in translator.feed(name, data)]
    _, result, _ = _pump_all(chunks)
    assert result.reasoning == "onetwo" and result.reasoning_signature == ""


def _gemini_sim_frames(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    sc = parse_scenario(scenario)
    request = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    view = GEMINI_SSE_WIRE.parse_request(request, {"model": "gemini-2.5-flash"})
    plan = build_plan(sc, "p", "gemini-2.5-flash", view.prompt_chars, "abcd1234")
    frames = GEMINI_SSE_WIRE.render_stream(plan, sc, view, "resp-1", 1700000000)
    return [json.loads(f.data.decode().removeprefix("data: ")) for f in frames if f.data.startswith(b"data: ")]


def test_gemini_thought_signature_reaches_the_pump_result() -> None:
    frames = _gemini_sim_frames({"reasoning": "Thinking hard.", "text": "Answer.", "reasoning_signature": SIGNATURE})
    thought_parts = [p for f in frames for p in f["candidates"][0]["content"]["parts"] if p.get("thought")]
    assert thought_parts[-1]["thoughtSignature"] == SIGNATURE
    assert all("thoughtSignature" not in p for p in thought_parts[:-1])

    translator = GeminiStreamTranslator(created=1700000000)
    chunks = [c for f in frames for c in translator.feed(f)] + translator.finish()
    out, result, _ = _pump_all(chunks)
    assert (result.reasoning, result.text, result.reasoning_signature) == ("Thinking hard.", "Answer.", SIGNATURE)
    assert SIGNATURE not in _text_of(out)


def test_gemini_without_a_scripted_signature_has_none_on_its_thoughts() -> None:
    frames = _gemini_sim_frames({"reasoning": "Thinking hard.", "text": "Answer."})
    translator = GeminiStreamTranslator(created=1700000000)
    chunks = [c for f in frames for c in translator.feed(f)] + translator.finish()
    _, result, _ = _pump_all(chunks)
    assert result.reasoning == "Thinking hard." and result.reasoning_signature == ""  # the text part's is not it


# ---- send back: one canonical history, three wires -------------------------------------------------------

TOOLS: Any = [
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
]


def _history(**assistant_extra: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}
                ],
                "reasoning_content": "Need the weather.",
                **assistant_extra,
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "tools": TOOLS,
        "reasoning_effort": "low",
    }


def _upstream(model: str, chat: dict[str, Any]) -> dict[str, Any]:
    return parse_chat_request(chat).upstream_body(model, stream=True)


def test_signed_history_on_every_wire() -> None:
    chat = _history(reasoning_signature=SIGNATURE)

    anthropic = to_messages_request(_upstream("claude-sonnet-4-5", chat))
    assert anthropic["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert anthropic["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Need the weather.", "signature": SIGNATURE},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    ANTHROPIC_WIRE.parse_request(anthropic, {})  # valid for the simulator (strict like Anthropic)

    gemini = to_gemini_request(_upstream("gemini-2.5-flash", chat))
    assert gemini["contents"][1]["parts"][:2] == [
        {"text": "Need the weather.", "thought": True, "thoughtSignature": SIGNATURE},
        {"text": "Checking."},
    ]
    GEMINI_SSE_WIRE.parse_request(gemini, {"model": "gemini-2.5-flash"})

    canonical = _upstream("model-x", chat)
    openai = without_signatures(canonical)
    assistant = openai["messages"][1]
    assert assistant["reasoning_content"] == "Need the weather."
    assert "reasoning_signature" not in assistant
    assert canonical["messages"][1]["reasoning_signature"] == SIGNATURE  # the shared body is not changed
    OPENAI_WIRE.parse_request(openai, {})


def test_unsigned_history_is_as_before_on_every_wire() -> None:
    chat = _history()
    anthropic = to_messages_request(_upstream("claude-sonnet-4-5", chat))
    assert "thinking" not in anthropic  # a tool loop without its signed block: thinking stays off
    assert [b["type"] for b in anthropic["messages"][1]["content"]] == ["text", "tool_use"]
    gemini = to_gemini_request(_upstream("gemini-2.5-flash", chat))
    assert not any(p.get("thought") for c in gemini["contents"] for p in c["parts"])
    canonical = _upstream("model-x", chat)
    assert without_signatures(canonical) is canonical
    assert canonical["messages"][1]["reasoning_content"] == "Need the weather."


def test_signed_blocks_are_not_sent_when_thinking_is_off() -> None:
    for effort in (None, "none"):
        chat = _history(reasoning_signature=SIGNATURE)
        chat.pop("reasoning_effort")
        if effort:
            chat["reasoning_effort"] = effort
        anthropic = to_messages_request(_upstream("claude-sonnet-4-5", chat))
        assert "thinking" not in anthropic
        assert [b["type"] for b in anthropic["messages"][1]["content"]] == ["text", "tool_use"]
        ANTHROPIC_WIRE.parse_request(anthropic, {})


def test_forced_tool_keeps_thinking_off_and_drops_the_blocks() -> None:
    chat = _history(reasoning_signature=SIGNATURE)
    chat["tool_choice"] = "required"
    anthropic = to_messages_request(_upstream("claude-sonnet-4-5", chat))
    assert "thinking" not in anthropic
    assert anthropic["messages"][1]["content"][0]["type"] == "text"


# ---- inbound Anthropic clients ---------------------------------------------------------------------------


def _anthropic_client(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 4000,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
        ],
    }


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}


def test_client_signed_thinking_reaches_an_anthropic_upstream_unchanged() -> None:
    block = {"type": "thinking", "thinking": "Weigh it.", "signature": SIGNATURE}
    req = to_chat_request(parse_messages_request(_anthropic_client([block, TOOL_USE])), "auto")
    upstream = req.upstream_body("claude-sonnet-4-5", stream=False)
    assert upstream["messages"][1]["reasoning_content"] == "Weigh it."
    assert upstream["messages"][1]["reasoning_signature"] == SIGNATURE
    sent = to_messages_request(upstream)
    assert sent["messages"][1]["content"] == [block, TOOL_USE]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    ANTHROPIC_WIRE.parse_request(sent, {})
    # Elsewhere: Gemini gets a signed thought part, the OpenAI wire the text only.
    parts = to_gemini_request({**upstream, "model": "gemini-2.5-flash"})["contents"][1]["parts"]
    assert parts[0] == {"text": "Weigh it.", "thought": True, "thoughtSignature": SIGNATURE}
    assert "reasoning_signature" not in without_signatures(upstream)["messages"][1]


def test_client_redacted_thinking_goes_back_verbatim_and_in_order() -> None:
    blocks = [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "thinking", "thinking": "Weigh it.", "signature": SIGNATURE},
    ]
    req = to_chat_request(parse_messages_request(_anthropic_client([*blocks, TOOL_USE])), "auto")
    upstream = req.upstream_body("claude-sonnet-4-5", stream=False)
    assistant = upstream["messages"][1]
    assert assistant["thinking_blocks"] == blocks
    assert assistant["reasoning_content"] == "Weigh it." and "reasoning_signature" not in assistant
    sent = to_messages_request(upstream)
    assert sent["messages"][1]["content"] == [*blocks, TOOL_USE]
    ANTHROPIC_WIRE.parse_request(sent, {})
    openai = without_signatures(upstream)["messages"][1]
    assert "thinking_blocks" not in openai and openai["reasoning_content"] == "Weigh it."
    gemini = to_gemini_request({**upstream, "model": "gemini-2.5-flash"})
    assert not any(p.get("thought") for c in gemini["contents"] for p in c["parts"])


def test_client_unsigned_thinking_is_dropped() -> None:
    block = {"type": "thinking", "thinking": "Rendered by a gateway.", "signature": ""}
    req = to_chat_request(parse_messages_request(_anthropic_client([block, TOOL_USE])), "auto")
    assistant = req.upstream_body("claude-sonnet-4-5", stream=False)["messages"][1]
    assert "reasoning_content" not in assistant and "reasoning_signature" not in assistant


# ---- surfaces --------------------------------------------------------------------------------------------


def _outcome(result: PumpResult) -> TurnOutcome:
    return TurnOutcome(attempt=None, result=result, ttfb_ms=None, tokens_out=3)  # type: ignore[arg-type]


def test_non_stream_bodies_carry_the_signature_where_their_wire_has_a_place() -> None:
    result = PumpResult(text="Answer.", reasoning="Think.", reasoning_signature=SIGNATURE)
    anthropic = message_body(_outcome(result), model="claude", input_estimate=1, message_id="msg_1")
    assert anthropic["content"][0] == {"type": "thinking", "thinking": "Think.", "signature": SIGNATURE}
    chat = completion_body(result, "m", usage_fallback={})["choices"][0]["message"]
    assert chat["reasoning_content"] == "Think." and chat["reasoning_signature"] == SIGNATURE
    unsigned = completion_body(PumpResult(text="a", reasoning="r"), "m", usage_fallback={})
    assert "reasoning_signature" not in unsigned["choices"][0]["message"]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_surfaces_without_a_place_for_it_never_show_the_signature() -> None:
    batch = [
        _chunk({"role": "assistant", "reasoning_content": "Think."}),
        _chunk({"reasoning_signature": SIGNATURE}),
        _chunk({"content": "Answer."}),
        _chunk({}, "stop"),
    ]
    completions = CompletionsRenderer()
    out = completions.chunks(copy.deepcopy(batch)) + completions.done()
    assert SIGNATURE.encode() not in out and b"Answer." in out
    gemini = GeminiStreamRenderer(
        sse=True, model_version="m", response_id="r", include_thoughts=True, prompt_estimate=1
    )
    out = gemini.chunks(copy.deepcopy(batch)) + gemini.done()
    assert SIGNATURE.encode() not in out and b"Answer." in out


# ---- the simulator's Anthropic wire checks thinking blocks like Anthropic --------------------------------


def _request(messages: list[dict[str, Any]], *, thinking: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 4000,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "messages": messages,
    }
    if thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    return body


def _loop(first: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [*first, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (_request(_loop([{"type": "thinking", "thinking": "x"}])), "messages.1.content.0.signature: Field required"),
        (
            _request(_loop([{"type": "thinking", "thinking": "x", "signature": ""}])),
            "messages.1.content.0.signature: Field required",
        ),
        (
            _request(_loop([{"type": "thinking", "thinking": "changed", "signature": signature_of("original")}])),
            "Invalid `signature` in `thinking` block",
        ),
        (_request(_loop([{"type": "redacted_thinking"}])), "messages.1.content.0.data: Field required"),
        (_request(_loop([{"type": "text", "text": "hm"}])), "Expected `thinking` or `redacted_thinking`, but found `text`"),
        (_request(_loop([])), "Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
    ],
)
def test_sim_refuses_what_anthropic_refuses_about_thinking(body: dict[str, Any], fragment: str) -> None:
    with pytest.raises(WireRequestError) as info:
        ANTHROPIC_WIRE.parse_request(body, {})
    assert fragment in str(info.value)


def test_sim_accepts_signed_thinking_and_loops_without_thinking() -> None:
    signed = {"type": "thinking", "thinking": "original", "signature": signature_of("original")}
    ANTHROPIC_WIRE.parse_request(_request(_loop([signed])), {})
    ANTHROPIC_WIRE.parse_request(_request(_loop([{"type": "redacted_thinking", "data": "abc"}, signed])), {})
    ANTHROPIC_WIRE.parse_request(_request(_loop([{"type": "text", "text": "hm"}]), thinking=False), {})
    ANTHROPIC_WIRE.parse_request(_request(_loop([{"type": "thinking", "thinking": "t", "signature": SIGNATURE}])), {})


def test_reasoning_signature_scenario_field_is_a_string() -> None:
    assert parse_scenario({"reasoning_signature": "abc"}).reasoning_signature == "abc"
    assert parse_scenario({}).reasoning_signature is None
    with pytest.raises(ScenarioError, match="reasoning_signature"):
        parse_scenario({"reasoning_signature": 3})
