"""Inline tool-call dialect rescue: the parser (table-driven per dialect), the stream-side detection in the
pump (every dialect split across chunks at awkward boundaries), the non-stream path, and Groq's
``failed_generation`` 400 turned into a synthetic success.

Also the hold measurement quoted in docs/tools.md: how much of an ordinary answer the pump holds back
before committing when tools are declared.
"""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any

import pytest

from freellm.config import ToolsConfig
from freellm.core.request import ChatRequest, parse_chat_request
from freellm.engine.dialects import HEAD_MATCH, HEAD_NO, HEAD_PREFIX, bare_json_head, could_become_marker
from freellm.engine.pump import StreamPump
from freellm.engine.tools.hooks import pump_hooks
from freellm.engine.tools.rescue import json_end, rescue_inline_tool_calls
from freellm.errors import UpstreamError
from freellm.providers.http import failed_generation_stream

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
SCHEMAS: dict[str, dict[str, Any]] = {"get_weather": WEATHER, "search": {}}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "search", "parameters": {}}},
]

KIMI = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>'
)
DEEPSEEK = (
    "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function"
    '<\uff5ctool\u2581sep\uff5c>get_weather\n```json\n{"city": "Oslo"}\n```'
    "<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>"
)
FUNCTION = '<function=get_weather>{"city": "Oslo"}</function>'
FUNCTION_NO_GT = '<function=get_weather{"city": "Oslo"}</function>'
HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
QWEN_CODER = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)
BARE = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
BARE_FENCED = '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'

WELL_FORMED = {
    "kimi": KIMI,
    "deepseek": DEEPSEEK,
    "function": FUNCTION,
    "function-no-gt": FUNCTION_NO_GT,
    "hermes": HERMES,
    "qwen-coder": QWEN_CODER,
    "bare-json": BARE,
    "bare-json-fenced": BARE_FENCED,
}

MULTIPLE = {
    "kimi": (
        "<|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>'
        '<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{"q": "news"}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    ),
    "function": '<function=get_weather>{"city": "Oslo"}</function>\n<function=search>{"q": "news"}</function>',
    "hermes": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"q": "news"}}</tool_call>'
    ),
}

UNDECLARED = {
    "kimi": KIMI.replace("get_weather", "rm_rf"),
    "function": FUNCTION.replace("get_weather", "rm_rf"),
    "hermes": HERMES.replace("get_weather", "rm_rf"),
    "kimi-opaque-id": KIMI.replace("functions.get_weather:0", "chatcmpl-tool-5f1e2d"),
}

UNPARSEABLE = {
    "kimi-broken-json": KIMI.replace('{"city": "Oslo"}', '{"city": "Os'),
    "kimi-no-end": KIMI.replace("<|tool_call_end|>", ""),
    "function-unterminated": '<function=get_weather>{"city": "Oslo"',
    "function-array-args": '<function=get_weather>["Oslo"]</function>',
    "function-no-args": "<function=get_weather",
    "hermes-unclosed": '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "hermes-not-json": "<tool_call>get_weather(city='Oslo')</tool_call>",
    "hermes-no-name": '<tool_call>{"arguments": {"city": "Oslo"}}</tool_call>',
    "bare-json-truncated": '{"name": "get_weather", "arguments": {"city": "Os',
    "section-without-call": "<|tool_calls_section_begin|>nothing here<|tool_calls_section_end|>",
}


def names_args(calls: list[Any]) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in calls]


# ---- the parser --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", WELL_FORMED.values(), ids=WELL_FORMED.keys())
def test_each_dialect_is_rescued_with_a_fresh_call_id(text: str) -> None:
    rescue = rescue_inline_tool_calls(text, SCHEMAS)
    assert rescue.calls is not None and len(rescue.calls) == 1
    [call] = rescue.calls
    assert call.name == "get_weather"
    expected = {"city": "Oslo", "days": 3} if "parameter=days" in text else {"city": "Oslo"}
    assert json.loads(call.arguments) == expected
    assert call.id.startswith("call_") and len(call.id) == 29
    assert rescue.clean_text == ""


@pytest.mark.parametrize("text", MULTIPLE.values(), ids=MULTIPLE.keys())
def test_multiple_calls_keep_their_order(text: str) -> None:
    rescue = rescue_inline_tool_calls(text, SCHEMAS)
    assert rescue.calls is not None
    assert names_args(rescue.calls) == [("get_weather", {"city": "Oslo"}), ("search", {"q": "news"})]
    assert len({c.id for c in rescue.calls}) == 2


@pytest.mark.parametrize("text", UNDECLARED.values(), ids=UNDECLARED.keys())
def test_a_call_to_an_undeclared_tool_is_unparseable(text: str) -> None:
    rescue = rescue_inline_tool_calls(text, SCHEMAS)
    assert rescue.calls is None
    assert "rm_rf" not in rescue.reason  # model text never goes into the failure message


@pytest.mark.parametrize("text", UNPARSEABLE.values(), ids=UNPARSEABLE.keys())
def test_detected_but_unparseable_markup_is_a_dead_turn(text: str) -> None:
    rescue = rescue_inline_tool_calls(text, SCHEMAS)
    assert rescue.calls is None and rescue.reason


@pytest.mark.parametrize(
    "text",
    [
        "Hello, how can I help?",
        '{"name": "Alice", "age": 3}',  # JSON, but not naming a declared tool
        '{"name": "get_weather", "arguments": {"city": "Oslo"}} is how you would call it.',  # not the whole answer
        '{"name": "get_weather", "description": "a tool"}',  # names a tool, but is not a call
        '["get_weather"]',
        "",
    ],
)
def test_ordinary_answers_are_left_alone(text: str) -> None:
    rescue = rescue_inline_tool_calls(text, SCHEMAS)
    assert rescue.calls == [] and rescue.clean_text == text


def test_text_around_the_markup_is_kept_as_clean_text() -> None:
    rescue = rescue_inline_tool_calls(f"Let me look that up.\n{HERMES}\nOne moment.", SCHEMAS)
    assert rescue.calls is not None and names_args(rescue.calls) == [("get_weather", {"city": "Oslo"})]
    assert rescue.clean_text == "Let me look that up.\n\nOne moment."


def test_nothing_is_rescued_without_declared_tools_but_markup_never_passes() -> None:
    assert rescue_inline_tool_calls(HERMES, {}).calls is None
    assert rescue_inline_tool_calls(BARE, {}).calls == []


def test_string_encoded_arguments_in_a_dialect_are_decoded() -> None:
    text = '<tool_call>{"name": "get_weather", "parameters": "{\\"city\\": \\"Oslo\\"}"}</tool_call>'
    rescue = rescue_inline_tool_calls(text, SCHEMAS)
    assert rescue.calls is not None and names_args(rescue.calls) == [("get_weather", {"city": "Oslo"})]


def test_json_end_respects_strings_and_escapes() -> None:
    text = '{"a": "}{\\"]", "b": [1, {"c": "]"}]} tail'
    end = json_end(text, 0)
    assert text[:end] == '{"a": "}{\\"]", "b": [1, {"c": "]"}]}'
    assert json_end('{"a": 1', 0) == -1


@pytest.mark.parametrize(
    ("probe", "state"),
    [
        ("", HEAD_PREFIX),
        ("{", HEAD_PREFIX),
        ('{ "na', HEAD_PREFIX),
        ('{"name": "get_w', HEAD_PREFIX),
        ('{"name":"get_weather"', HEAD_MATCH),
        ('{\n  "name" : "search"', HEAD_MATCH),
        ('```json\n{"name": "search"', HEAD_MATCH),
        ("```", HEAD_PREFIX),
        ("```js", HEAD_PREFIX),
        ("```python", HEAD_NO),
        ('{"name": "get_x', HEAD_NO),
        ('{"city"', HEAD_NO),
        ("[1, 2]", HEAD_NO),
        ("Sure", HEAD_NO),
    ],
)
def test_bare_json_head_detection(probe: str, state: int) -> None:
    assert bare_json_head(probe, SCHEMAS.keys()) == state


# ---- through the pump, streamed ----------------------------------------------------------------------


def chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    d: dict[str, Any] = dict(delta)
    if content is not None:
        d["content"] = content
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "up",
        "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
    }


def request(*, streaming: bool = True, tools: list[Any] | None = None, **extra: Any) -> ChatRequest:
    body = {"model": "auto", "stream": streaming, "messages": [{"role": "user", "content": "hi"}], **extra}
    if tools != []:
        body["tools"] = tools or TOOLS
    return parse_chat_request(body)


def pump_for(req: ChatRequest, cfg: ToolsConfig | None = None) -> StreamPump:
    """The pump exactly as the driver builds it for one attempt of ``req``."""
    hooks = pump_hooks(req, cfg or ToolsConfig(), streaming=req.stream)
    return StreamPump(
        "m",
        wants_tools=req.wants_tools,
        rescue=hooks.rescue,
        repair=hooks.repair,
        validate=hooks.validate,
        check_text=hooks.check_text,
        tool_names=hooks.tool_names,
        hold_all=hooks.hold_all,
        think_tags=hooks.think_tags,
    )


def make_pump(*, streaming: bool = True, tools: list[Any] | None = None, **extra: Any) -> StreamPump:
    return pump_for(request(streaming=streaming, tools=tools, **extra))


def pieces_of(text: str, how: str) -> list[str]:
    if how == "chars":
        return list(text)
    if how == "pairs":
        return [text[i : i + 2] for i in range(0, len(text), 2)]
    if how == "whole":
        return [text]
    rng = random.Random(how)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 7)
        out.append(text[i : i + n])
        i += n
    return out


def stream(pump: StreamPump, pieces: list[str], finish: str = "stop") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Feed ``pieces`` (the first with the role); return (chunks released while streaming, from finish)."""
    during: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        extra = {"role": "assistant"} if i == 0 else {}
        during += pump.feed(copy.deepcopy(chunk(piece, **extra)))
    during += pump.feed(chunk(None, finish))
    return during, pump.finish(saw_done=True)


def content_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


def calls_of(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for c in chunks if c.get("choices") for call in c["choices"][0]["delta"].get("tool_calls") or []]


SPLITS = ["chars", "pairs", "seed-1", "seed-2", "seed-3", "whole"]


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("text", WELL_FORMED.values(), ids=WELL_FORMED.keys())
def test_streamed_dialect_is_held_and_becomes_one_tool_call_chunk(text: str, how: str) -> None:
    pump = make_pump()
    during, end = stream(pump, pieces_of(text, how), finish="stop")
    assert during == []  # nothing committed while the markup streamed
    out = during + end
    assert content_of(out) == ""
    [call] = calls_of(out)
    assert call["function"]["name"] == "get_weather" and call["id"].startswith("call_")
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert out[0]["choices"][0]["delta"].get("role") == "assistant"  # the held role goes out first


@pytest.mark.parametrize("how", SPLITS)
@pytest.mark.parametrize("text", MULTIPLE.values(), ids=MULTIPLE.keys())
def test_streamed_multiple_calls(text: str, how: str) -> None:
    during, end = stream(make_pump(), pieces_of(text, how))
    assert during == []
    assert [c["function"]["name"] for c in calls_of(end)] == ["get_weather", "search"]
    assert [c["index"] for c in calls_of(end)] == [0, 1]


@pytest.mark.parametrize("how", ["chars", "seed-4", "whole"])
@pytest.mark.parametrize(
    "text", [*UNPARSEABLE.values(), *UNDECLARED.values()], ids=[*UNPARSEABLE.keys(), *UNDECLARED.keys()]
)
def test_streamed_unparseable_dialect_fails_over_uncommitted(text: str, how: str) -> None:
    pump = make_pump()
    with pytest.raises(UpstreamError, match="unparseable inline tool-call dialect") as info:
        stream(pump, pieces_of(text, how))
    assert not pump.committed and info.value.skip_model


def test_streamed_dialect_with_text_before_it_leaves_the_text_as_content() -> None:
    # Text first: committed at once (passthrough), so the later markup can no longer be held.
    during, _ = stream(make_pump(), ["Sure, ", HERMES])
    assert content_of(during).startswith("Sure, ")


def test_structured_calls_and_a_streamed_dialect_are_merged() -> None:
    pump = make_pump()
    pump.feed(chunk(None, tool_calls=[{"index": 0, "id": "call_up", "function": {"name": "search", "arguments": "{}"}}]))
    _, end = stream(pump, pieces_of(HERMES, "pairs"))
    assert [c["function"]["name"] for c in calls_of(end)] == ["search", "get_weather"]


def test_bare_json_that_is_not_a_call_is_released_as_content_at_the_end() -> None:
    text = '{"name": "get_weather", "description": "it names a tool but is not a call"}'
    during, end = stream(make_pump(), pieces_of(text, "seed-5"))
    assert during == []  # its head looked like a call: held to the end
    assert content_of(end) == text and calls_of(end) == []
    assert end[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    "text",
    [
        '{"result": 42}',
        '{"name": "Alice"}',
        "```python\nprint(1)\n```",
        "<b>bold</b>",
        "<div>",
        "< 3 is less",
    ],
)
def test_json_code_and_markup_answers_commit_after_a_few_characters(text: str) -> None:
    pump = make_pump()
    released_at = None
    for i, ch in enumerate(text):
        if pump.feed(chunk(ch)):
            released_at = i
            break
    assert released_at is not None and released_at < 12
    assert pump.mode == "passthrough"


# ---- non-stream ----------------------------------------------------------------------------------------


def test_non_stream_reply_rescues_markup_anywhere_when_there_are_no_structured_calls() -> None:
    pump = make_pump(streaming=False)
    pump.feed(chunk(f"I'll check.\n{FUNCTION}", role="assistant"))
    out = pump.finish(saw_done=True)
    result = pump.result()
    assert result.text == "I'll check." and result.finish_reason == "tool_calls"
    assert names_args(result.tool_calls) == [("get_weather", {"city": "Oslo"})]
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_stream_reply_with_structured_calls_is_not_rescued() -> None:
    pump = make_pump(streaming=False)
    calls = [{"index": 0, "id": "call_up", "function": {"name": "search", "arguments": "{}"}}]
    pump.feed(chunk("plain words", role="assistant", tool_calls=calls))
    pump.finish(saw_done=True)
    assert [c.name for c in pump.result().tool_calls] == ["search"]
    assert pump.result().text == "plain words"


def test_non_stream_unparseable_reply_is_a_dead_turn() -> None:
    pump = make_pump(streaming=False)
    pump.feed(chunk("Calling: <tool_call>{broken</tool_call>", role="assistant"))
    with pytest.raises(UpstreamError, match="unparseable"):
        pump.finish(saw_done=True)


def test_non_stream_ordinary_reply_is_untouched() -> None:
    pump = make_pump(streaming=False)
    pump.feed(chunk("  Indented answer.", role="assistant"))
    pump.finish(saw_done=True)
    assert pump.result().text == "  Indented answer." and pump.result().tool_calls == []


def test_tool_choice_none_disables_the_rescue() -> None:
    pump = make_pump(tool_choice="none")
    assert pump.feed(chunk(HERMES))  # committed as ordinary text
    assert pump.mode == "passthrough"


# ---- Groq failed_generation ------------------------------------------------------------------------------


def groq_400(failed_generation: Any) -> UpstreamError:
    body = {
        "error": {
            "message": "Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": failed_generation,
        }
    }
    return UpstreamError("api error 400: Failed to call a function", status=400, body=body)


@pytest.mark.asyncio
async def test_failed_generation_becomes_a_synthetic_success_through_the_pump() -> None:
    sent = {"model": "llama-3.3-70b", "tools": TOOLS, "messages": []}
    upstream = failed_generation_stream(groq_400(FUNCTION_NO_GT), sent)
    assert upstream is not None and upstream.saw_done
    pump = make_pump()
    out: list[dict[str, Any]] = []
    async for c in upstream:
        out += pump.feed(c)
    out += pump.finish(saw_done=upstream.saw_done)
    [call] = calls_of(out)
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    ("err", "sent"),
    [
        (groq_400("I cannot do that"), {"tools": TOOLS}),  # nothing to rescue
        (groq_400(FUNCTION.replace("get_weather", "rm")), {"tools": TOOLS}),  # undeclared
        (groq_400(FUNCTION), {}),  # no tools were sent
        (groq_400(None), {"tools": TOOLS}),
        (UpstreamError("api error 500", status=500, body={"error": {"failed_generation": FUNCTION}}), {"tools": TOOLS}),
    ],
)
def test_failed_generation_that_cannot_be_rescued_stays_an_error(err: UpstreamError, sent: dict[str, Any]) -> None:
    assert failed_generation_stream(err, sent) is None


# ---- the hold measurement (docs/tools.md) -----------------------------------------------------------------

ORDINARY_ANSWERS = [
    "Sure! Here is a short summary of the article you sent.",
    "The capital of France is Paris.",
    "I'll run the tests first and then fix whatever fails.",
    "1. Open the file\n2. Edit the function\n3. Save",
    "```python\ndef add(a, b):\n    return a + b\n```",
    "<p>HTML answer</p>",
    '{"status": "ok", "items": [1, 2, 3]}',
    "  Leading spaces, then text.",
    "`code` first",
]


def hold_profile(text: str, piece: int) -> tuple[int, int]:
    """(characters held when the answer committed, chunks fed until then) for ``piece``-char chunks."""
    pump = make_pump()
    fed = 0
    for i in range(0, len(text), piece):
        fed += 1
        if pump.feed(chunk(text[i : i + piece])):
            return min(fed * piece, len(text)), fed
    return len(text), fed


@pytest.mark.parametrize("text", ORDINARY_ANSWERS)
def test_an_ordinary_answer_with_tools_is_held_only_until_its_first_characters_rule_markup_out(text: str) -> None:
    held_chars, _ = hold_profile(text, 1)
    probe = text.lstrip()
    # Never later than the first character at which neither a marker, a think tag nor a bare JSON call
    # head can still match (+1: that character itself).
    n = next(
        (i for i in range(1, len(probe) + 1) if not could_become_marker(probe[:i])
         and not "<think>".startswith(probe[:i])
         and bare_json_head(probe[:i], SCHEMAS.keys()) == HEAD_NO),
        len(probe),
    )
    assert held_chars <= (len(text) - len(probe)) + n
    assert held_chars <= 12


def test_hold_cost_report() -> None:
    """The per-answer figure docs/tools.md quotes: held characters/chunks and the pump's CPU per chunk."""
    profiles = [hold_profile(t, 4) for t in ORDINARY_ANSWERS]  # ~one token per chunk
    assert max(chunks for _, chunks in profiles) <= 3
    started = time.perf_counter()
    n = 0
    req = request()
    for _ in range(200):
        for text in ORDINARY_ANSWERS:
            pump = pump_for(req)
            for i in range(0, len(text), 4):
                pump.feed(chunk(text[i : i + 4]))
                n += 1
    per_chunk_us = (time.perf_counter() - started) / n * 1e6
    assert per_chunk_us < 200  # generous: CI machines vary; the measured figure is in docs/tools.md


def _report() -> None:  # pragma: no cover - `python -m tests.unit.test_tool_rescue` prints the hold figures
    print(f"{'answer':<44} {'held chars':>10} {'chunks':>6}  (1-char and 4-char chunks)")
    for text in ORDINARY_ANSWERS:
        c1, n1 = hold_profile(text, 1)
        c4, n4 = hold_profile(text, 4)
        print(f"{text[:42]!r:<44} {c1:>4} / {c4:<4} {n1:>3} / {n4}")
    for label, req in (("no tools", request(tools=[])), ("tools", request())):
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            n = 0
            for _ in range(300):
                for text in ORDINARY_ANSWERS:
                    pump = pump_for(req)
                    for i in range(0, len(text), 4):
                        pump.feed(chunk(text[i : i + 4]))
                        n += 1
                    pump.feed(chunk(None, "stop"))
                    pump.finish(saw_done=True)
            best = min(best, (time.perf_counter() - started) / n * 1e6)
        print(f"pump cost per chunk (hooks + pump built per answer, finish included), {label}: {best:.2f} us")


if __name__ == "__main__":
    _report()
