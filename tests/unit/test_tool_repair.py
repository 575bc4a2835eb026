"""Tool-call argument repair against the declared schemas: each schema shape, nested, already valid, not
JSON; plus the optional strict validation and its place in the pump."""

from __future__ import annotations

import json
from typing import Any

import pytest

from freellm.engine.pump import StreamPump, ToolCall
from freellm.engine.tools.repair import repair_arguments, repair_calls
from freellm.engine.tools.validate import schema_problem, tool_arguments_problem
from freellm.errors import UpstreamError

PATHS = {"type": "array", "items": {"type": "string"}}
EDIT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "paths": PATHS,
        "options": {"type": "object", "properties": {"depth": {"type": "integer"}, "tags": PATHS}},
        "edits": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"old": {"type": "string"}, "new": {"type": "string"}, "lines": {"type": "array"}},
            },
        },
        "count": {"type": "integer"},
        "maybe": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
        "either": {"type": ["array", "string"]},
        "ref": {"$ref": "#/$defs/Opts"},
    },
    "$defs": {"Opts": {"type": "object", "properties": {"ids": {"type": "array"}}}},
}


def enc(value: Any) -> str:
    return json.dumps(value)


CASES: list[tuple[str, Any, Any]] = [
    # (id, arguments value as the model sent it, expected decoded arguments)
    ("array-as-string", {"paths": enc(["a.py", "b.py"])}, {"paths": ["a.py", "b.py"]}),
    ("object-as-string", {"options": enc({"depth": 2})}, {"options": {"depth": 2}}),
    ("nested-object-then-array", {"options": enc({"tags": enc(["x"])})}, {"options": {"tags": ["x"]}}),
    (
        "array-items-walked",
        {"edits": [{"old": "a", "new": "b", "lines": enc([1, 2])}]},
        {"edits": [{"old": "a", "new": "b", "lines": [1, 2]}]},
    ),
    (
        "array-of-objects-as-string",
        {"edits": enc([{"old": "a", "new": "b", "lines": enc([3])}])},
        {"edits": [{"old": "a", "new": "b", "lines": [3]}]},
    ),
    ("anyOf-nullable-array", {"maybe": "[1, 2]"}, {"maybe": [1, 2]}),
    ("local-ref", {"ref": enc({"ids": enc([7])})}, {"ref": {"ids": [7]}}),
    # left alone:
    ("string-typed-parameter", {"path": enc(["not", "decoded"])}, {"path": enc(["not", "decoded"])}),
    ("string-allowed-by-type-list", {"either": "[1]"}, {"either": "[1]"}),
    ("undescribed-key", {"extra": "[1, 2]"}, {"extra": "[1, 2]"}),
    ("type-mismatch-decoded-value", {"paths": enc({"a": 1})}, {"paths": enc({"a": 1})}),
    ("not-json-string", {"paths": "a.py, b.py"}, {"paths": "a.py, b.py"}),
    ("number-stays", {"count": "3"}, {"count": "3"}),
]


@pytest.mark.parametrize(("value", "expected"), [(v, e) for _, v, e in CASES], ids=[c[0] for c in CASES])
def test_repair_by_schema_shape(value: Any, expected: Any) -> None:
    repaired = repair_arguments(json.dumps(value), EDIT)
    assert json.loads(repaired) == expected


@pytest.mark.parametrize(
    "arguments",
    [
        '{"paths": ["a.py"], "path": "x"}',
        '{ "paths" : [ "a.py" ] }',  # odd spacing survives: nothing to fix, so not re-serialised
        '{"count": 3, "unknown": "[1]"}',
        "{}",
    ],
)
def test_valid_arguments_are_returned_byte_for_byte(arguments: str) -> None:
    assert repair_arguments(arguments, EDIT) is arguments


@pytest.mark.parametrize("arguments", ['{"paths": ["a.py"', "not json at all", ""])
def test_arguments_that_are_not_json_are_returned_unchanged(arguments: str) -> None:
    assert repair_arguments(arguments, EDIT) is arguments


def test_a_whole_object_encoded_as_a_string_is_unwrapped_then_walked() -> None:
    inner = {"paths": enc(["a"])}
    assert json.loads(repair_arguments(json.dumps(json.dumps(inner)), EDIT)) == {"paths": ["a"]}
    # Twice encoded, and with no schema at all:
    assert json.loads(repair_arguments(json.dumps(json.dumps(json.dumps({"a": 1}))), None)) == {"a": 1}


def test_a_string_that_is_not_an_object_is_not_unwrapped() -> None:
    assert repair_arguments('"[1, 2]"', EDIT) == '"[1, 2]"'
    assert repair_arguments('"hello"', None) == '"hello"'


def test_unresolvable_ref_and_odd_schemas_fail_safe() -> None:
    assert repair_arguments('{"a": "[1]"}', {"properties": {"a": {"$ref": "#/nowhere"}}}) == '{"a": "[1]"}'
    assert repair_arguments('{"a": "[1]"}', {"properties": {"a": {"$ref": "http://x/y"}}}) == '{"a": "[1]"}'
    assert repair_arguments('{"a": "[1]"}', {"properties": {"a": {}}}) == '{"a": "[1]"}'
    assert repair_arguments('{"a": "[1]"}', {"properties": "oops"}) == '{"a": "[1]"}'
    recursive = {"$defs": {"N": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}}, "$ref": "#/$defs/N"}
    deep = {"kids": [{"kids": enc([{"kids": []}])}]}
    assert json.loads(repair_arguments(json.dumps(deep), recursive)) == {"kids": [{"kids": [{"kids": []}]}]}


def test_repair_calls_uses_each_calls_own_schema() -> None:
    calls = [
        ToolCall("c1", "edit", json.dumps({"paths": enc(["a"])})),
        ToolCall("c2", "other", json.dumps({"paths": enc(["a"])})),
    ]
    repair_calls(calls, {"edit": EDIT})
    assert json.loads(calls[0].arguments) == {"paths": ["a"]}
    assert json.loads(calls[1].arguments) == {"paths": enc(["a"])}  # undeclared: no schema, untouched


# ---- strict validation ------------------------------------------------------------------------------------

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_schema_problem_names_the_keyword_and_path_never_the_value() -> None:
    problem = schema_problem({"city": "unauthorized rate limit"}, {"type": "object", "properties": {"city": {"type": "integer"}}})
    assert problem == "schema keyword type failed at #/properties/city/type"
    assert schema_problem({"city": "Oslo"}, WEATHER) is None


@pytest.mark.parametrize("schema", [{"type": "bogus"}, {"$ref": "#/nope"}, {"required": "city"}])
def test_validation_fails_open_on_a_bad_schema(schema: dict[str, Any]) -> None:
    assert schema_problem({}, schema) is None


def test_tool_arguments_problem_skips_undeclared_and_non_json() -> None:
    calls = [ToolCall("a", "x", "{}"), ToolCall("b", "get_weather", "not json"), ToolCall("c", "get_weather", "{}")]
    assert tool_arguments_problem(calls, {"get_weather": WEATHER}) == "get_weather: schema keyword required failed at #/required"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "u",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def call_delta(arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": arguments}}]}


def validate(calls: list[ToolCall]) -> str | None:
    return tool_arguments_problem(calls, {"get_weather": WEATHER})


def test_pump_fails_over_an_uncommitted_turn_with_invalid_arguments() -> None:
    pump = StreamPump("model-q", wants_tools=True, validate=validate)
    pump.feed(chunk(call_delta("{}")))
    with pytest.raises(UpstreamError, match=r"invalid tool arguments from model-q \(get_weather: ") as info:
        pump.finish(saw_done=True)
    assert info.value.skip_model and info.value.skip_bench


def test_pump_sends_invalid_arguments_once_committed() -> None:
    pump = StreamPump("m", wants_tools=True, validate=validate)
    assert pump.feed(chunk({"content": "Checking."}))
    pump.feed(chunk(call_delta("{}")))
    out = pump.finish(saw_done=True)
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_pump_repairs_before_validating() -> None:
    def repair(calls: list[ToolCall]) -> list[ToolCall]:
        return repair_calls(calls, {"get_weather": WEATHER})

    pump = StreamPump("m", wants_tools=True, validate=validate, repair=repair)
    pump.feed(chunk(call_delta(json.dumps(json.dumps({"city": "Oslo"})))))
    out = pump.finish(saw_done=True)
    [call] = out[0]["choices"][0]["delta"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
