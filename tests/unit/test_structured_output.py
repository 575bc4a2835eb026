"""``response_format`` enforcement: valid JSON passes, fenced/embedded JSON is healed, prose fails over —
for non-stream replies and for held streams, while nothing has been committed."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from freellm.config import ToolsConfig
from freellm.core.request import parse_chat_request
from freellm.engine.failure import classify
from freellm.engine.pump import StreamPump
from freellm.engine.tools.hooks import pump_hooks
from freellm.engine.tools.structured import enforce_json, heal_json
from freellm.errors import UpstreamError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', "  [1, 2]\n", '"a string"', "42", '{"nested": {"x": [true, null]}}'],
)
def test_valid_json_passes_unchanged(text: str) -> None:
    assert enforce_json(text, "stop") is text


@pytest.mark.parametrize(
    ("text", "healed"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('Here you go:\n```\n[1, 2]\n```\nAnything else?', "[1, 2]"),
        ('Sure! {"a": {"b": 2}} Hope that helps.', '{"a": {"b": 2}}'),
        ('The list is [1, 2, 3].', "[1, 2, 3]"),
        ('Two: {"x": 1} and {"y": {"z": 2}}', '{"y": {"z": 2}}'),  # the longest slice that decodes
        ('{"a": "}"} trailing', '{"a": "}"}'),
    ],
)
def test_fenced_or_embedded_json_is_healed(text: str, healed: str) -> None:
    assert enforce_json(text, "stop") == healed


@pytest.mark.parametrize("text", ["I think the answer is Paris.", "{not json}", "```\nplain\n```", ""])
def test_prose_is_an_ignored_response_format(text: str) -> None:
    with pytest.raises(UpstreamError, match="ignored response_format") as info:
        enforce_json(text, "stop")
    failure = classify(info.value)
    assert failure.error_class == "format_ignored"
    assert failure.skip_model and failure.skip_bench  # model skipped for the request, no cooldown


def test_json_cut_at_the_token_limit_is_truncated_json() -> None:
    with pytest.raises(UpstreamError, match="truncated json") as info:
        enforce_json('{"a": [1, 2', "length")
    assert classify(info.value).error_class == "format_ignored"


def test_schema_is_checked_only_with_strict_validation() -> None:
    assert enforce_json('{"town": "Oslo"}', "stop", schema=SCHEMA) == '{"town": "Oslo"}'
    with pytest.raises(UpstreamError, match="does not match the json_schema"):
        enforce_json('{"town": "Oslo"}', "stop", schema=SCHEMA, strict=True)
    assert enforce_json('{"city": "Oslo"}', "stop", schema=SCHEMA, strict=True) == '{"city": "Oslo"}'


def test_heal_json_returns_the_value_too() -> None:
    assert heal_json('x {"a": 1} y') == ('{"a": 1}', {"a": 1})
    assert heal_json("nothing") is None


# ---- through the pump ------------------------------------------------------------------------------------


def chunk(content: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    d: dict[str, Any] = dict(delta)
    if content is not None:
        d["content"] = content
    return {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "u",
            "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def pump_for(*, stream: bool, fmt: dict[str, Any] | None, cfg: ToolsConfig | None = None, **extra: Any) -> StreamPump:
    body: dict[str, Any] = {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": "hi"}], **extra}
    if fmt is not None:
        body["response_format"] = fmt
    req = parse_chat_request(body)
    hooks = pump_hooks(req, cfg or ToolsConfig(), streaming=stream)
    return StreamPump("m", wants_tools=req.wants_tools, rescue=hooks.rescue, repair=hooks.repair,
                      validate=hooks.validate, check_text=hooks.check_text, tool_names=hooks.tool_names,
                      hold_all=hooks.hold_all, think_tags=hooks.think_tags)


def feed_all(pump: StreamPump, pieces: list[str], finish: str = "stop") -> tuple[list[Any], list[Any]]:
    during: list[Any] = []
    for i, p in enumerate(pieces):
        during += pump.feed(copy.deepcopy(chunk(p, **({"role": "assistant"} if i == 0 else {}))))
    during += pump.feed(chunk(None, finish))
    return during, pump.finish(saw_done=True)


def content(chunks: list[Any]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


FORMATS = [{"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA}}]


@pytest.mark.parametrize("fmt", FORMATS, ids=["json_object", "json_schema"])
def test_non_stream_fenced_json_is_healed(fmt: dict[str, Any]) -> None:
    pump = pump_for(stream=False, fmt=fmt)
    feed_all(pump, ['Here:\n```json\n{"city": "Oslo"}\n```'])
    assert pump.result().text == '{"city": "Oslo"}'


def test_non_stream_prose_fails_over() -> None:
    pump = pump_for(stream=False, fmt={"type": "json_object"})
    with pytest.raises(UpstreamError, match="ignored response_format"):
        feed_all(pump, ["The weather in Oslo is mild."])


def test_stream_with_response_format_is_held_and_healed_at_the_end() -> None:
    pump = pump_for(stream=True, fmt={"type": "json_object"})
    during, end = feed_all(pump, ["```json\n", '{"city": ', '"Oslo"}', "\n```"])
    assert during == []  # held: the check at the end can still fail over
    assert content(end) == '{"city": "Oslo"}'
    assert end[0]["choices"][0]["delta"].get("role") == "assistant"


def test_stream_with_response_format_prose_fails_over_uncommitted() -> None:
    pump = pump_for(stream=True, fmt={"type": "json_object"})
    with pytest.raises(UpstreamError, match="ignored response_format"):
        feed_all(pump, ["Sure, ", "the city is Oslo."])
    assert not pump.committed


def test_stream_hold_can_be_turned_off_and_then_nothing_is_checked() -> None:
    pump = pump_for(stream=True, fmt={"type": "json_object"}, cfg=ToolsConfig(hold_json_streams=False))
    during, end = feed_all(pump, ["Sure, ", "prose."])
    assert content(during + end) == "Sure, prose."


def test_enforcement_can_be_turned_off() -> None:
    pump = pump_for(stream=False, fmt={"type": "json_object"}, cfg=ToolsConfig(enforce_response_format=False))
    feed_all(pump, ["prose"])
    assert pump.result().text == "prose"


def test_a_tool_call_turn_is_not_checked_for_json() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    pump = pump_for(stream=False, fmt={"type": "json_object"}, tools=tools)
    feed_all(pump, ['<tool_call>{"name": "f", "arguments": {}}</tool_call>'])
    assert [c.name for c in pump.result().tool_calls] == ["f"]


def test_think_block_before_json_is_reasoning_not_a_format_violation() -> None:
    pump = pump_for(stream=False, fmt={"type": "json_object"})
    feed_all(pump, ['<think>format it</think>{"a": 1}'])
    assert json.loads(pump.result().text) == {"a": 1} and pump.result().reasoning == "format it"
