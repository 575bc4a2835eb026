"""The canonical chat request: validation (spec/core.md §1.5), normalisation (§1.6), upstream body."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from freellm.core.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from freellm.core.request import ChatRequest, parse_chat_request
from freellm.errors import ClientError

USER = {"role": "user", "content": "hi"}


def body(**fields: Any) -> dict[str, Any]:
    return {"messages": [USER], **fields}


def reject(b: object) -> ClientError:
    with pytest.raises(ClientError) as info:
        parse_chat_request(b)
    err = info.value
    assert err.status == 400
    assert err.type == "invalid_request_error"
    assert err.message.startswith("Invalid request: ")
    return err


# ---- validation: accepted shapes -------------------------------------------------------------------

VALID = {
    "minimal": body(),
    "user parts and bare strings": {
        "messages": [{"role": "user", "content": ["a", {"type": "text", "text": "b"}, {"type": "x", "y": 1}]}]
    },
    "empty content array": {"messages": [{"role": "user", "content": []}]},
    "system, developer": {
        "messages": [{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}, USER]
    },
    "assistant null content, null tool_calls, reasoning": {
        "messages": [
            USER,
            {"role": "assistant", "content": None, "tool_calls": None, "reasoning_content": "think"},
        ]
    },
    "assistant without content key": {"messages": [USER, {"role": "assistant"}]},
    "tool null content, no id": {"messages": [USER, {"role": "tool", "content": None}]},
    "tool without content key": {"messages": [USER, {"role": "tool"}]},
    "function role": {"messages": [USER, {"role": "function", "name": "f", "content": "r"}]},
    "tool call object args, no id/type": {
        "messages": [
            USER,
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
        ]
    },
    "tool call without arguments": {
        "messages": [USER, {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]
    },
    "temperature bounds": body(temperature=0, top_p=1),
    "temperature 2": body(temperature=2.0, top_p=0),
    "max_tokens zero": body(max_tokens=0),
    "max_tokens negative": body(max_tokens=-5),
    "max_tokens integral float": body(max_tokens=100.0),
    "stop string": body(stop="x"),
    "stop 64": body(stop=[str(i) for i in range(64)]),
    "tools null": body(tools=None, tool_choice=None),
    "tools empty": body(tools=[]),
    "tool minimal": body(tools=[{"function": {"name": "f"}}]),
    "tool full": body(
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "d",
                    "parameters": {"type": "object"},
                    "strict": True,
                },
            }
        ]
    ),
    **{f"tool_choice {c}": body(tool_choice=c) for c in ("none", "auto", "required", "any")},
    "tool_choice object": body(tool_choice={"type": "function", "function": {"name": "f"}}),
    **{
        f"response_format {t}": body(response_format={"type": t})
        for t in ("text", "json_object", "json_schema")
    },
    "json_schema body": body(
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    ),
    "extended knobs": body(
        top_k=1,
        min_p=0.5,
        seed=-3,
        presence_penalty=-2,
        frequency_penalty=2,
        repetition_penalty=0.01,
        logit_bias={"50256": -100},
        logprobs=True,
        top_logprobs=20,
    ),
    "extended knobs null": body(
        top_k=None,
        min_p=None,
        seed=None,
        presence_penalty=None,
        frequency_penalty=None,
        repetition_penalty=None,
        logit_bias=None,
        logprobs=None,
        top_logprobs=None,
        response_format=None,
        stop=None,
        temperature=None,
        top_p=None,
        max_tokens=None,
        stream=None,
        model=None,
        reasoning_effort=None,
        reasoning=None,
    ),
    "free-form reasoning effort": body(reasoning_effort="turbo", reasoning={"effort": 7}),
    "reasoning not an object": body(reasoning="high"),
    "int64 seed": body(seed=2**63 - 1),
}


@pytest.mark.parametrize("b", VALID.values(), ids=list(VALID))
def test_valid_bodies_parse(b: dict[str, Any]) -> None:
    req = parse_chat_request(copy.deepcopy(b))
    assert isinstance(req, ChatRequest)
    orjson.dumps(req.upstream_body("m", stream=True))


# ---- validation: rejected shapes, each with its exact path -----------------------------------------

M = "messages.0"
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("messages missing", {}, "messages"),
    ("messages empty", {"messages": []}, "messages"),
    ("messages null", {"messages": None}, "messages"),
    ("messages not a list", {"messages": "hi"}, "messages"),
    ("message not an object", {"messages": ["hi"]}, M),
    ("role missing", {"messages": [{"content": "x"}]}, f"{M}.role"),
    ("role unknown", {"messages": [{"role": "robot", "content": "x"}]}, f"{M}.role"),
    ("role not a string", {"messages": [{"role": 1, "content": "x"}]}, f"{M}.role"),
    ("user content missing", {"messages": [{"role": "user"}]}, f"{M}.content"),
    ("user content null", {"messages": [{"role": "user", "content": None}]}, f"{M}.content"),
    ("system content null", {"messages": [{"role": "system", "content": None}]}, f"{M}.content"),
    ("developer content number", {"messages": [{"role": "developer", "content": 1}]}, f"{M}.content"),
    ("content object", {"messages": [{"role": "user", "content": {"text": "x"}}]}, f"{M}.content"),
    ("content part number", {"messages": [{"role": "user", "content": ["a", 3]}]}, f"{M}.content"),
    ("content part nested list", {"messages": [{"role": "user", "content": [["a"]]}]}, f"{M}.content"),
    ("assistant content number", {"messages": [{"role": "assistant", "content": 1}]}, f"{M}.content"),
    ("tool content number", {"messages": [{"role": "tool", "content": True}]}, f"{M}.content"),
    ("function without name", {"messages": [{"role": "function", "content": "r"}]}, f"{M}.name"),
    ("name not a string", {"messages": [{"role": "user", "content": "x", "name": 3}]}, f"{M}.name"),
    (
        "reasoning_content number",
        {"messages": [{"role": "assistant", "reasoning_content": 1}]},
        f"{M}.reasoning_content",
    ),
    (
        "tool_call_id number",
        {"messages": [{"role": "tool", "content": "r", "tool_call_id": 5}]},
        f"{M}.tool_call_id",
    ),
    ("tool_calls not a list", {"messages": [{"role": "assistant", "tool_calls": {}}]}, f"{M}.tool_calls"),
    (
        "tool call not an object",
        {"messages": [{"role": "assistant", "tool_calls": ["x"]}]},
        f"{M}.tool_calls.0",
    ),
    (
        "tool call without function",
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]},
        f"{M}.tool_calls.0.function",
    ),
    (
        "tool call without name",
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
        f"{M}.tool_calls.0.function.name",
    ),
    (
        "arguments number",
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}]},
        f"{M}.tool_calls.0.function.arguments",
    ),
    (
        "arguments array",
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": []}}]}]},
        f"{M}.tool_calls.0.function.arguments",
    ),
    (
        "tool call id number",
        {"messages": [{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]},
        f"{M}.tool_calls.0.id",
    ),
    ("second message bad", {"messages": [USER, {"role": "user", "content": 5}]}, "messages.1.content"),
    ("model number", body(model=5), "model"),
    ("stream string", body(stream="true"), "stream"),
    ("stream number", body(stream=1), "stream"),
    ("stream_options string", body(stream_options="x"), "stream_options"),
    ("temperature low", body(temperature=-0.1), "temperature"),
    ("temperature high", body(temperature=2.01), "temperature"),
    ("temperature string", body(temperature="1"), "temperature"),
    ("temperature bool", body(temperature=True), "temperature"),
    ("temperature nan", body(temperature=float("nan")), "temperature"),
    ("temperature inf", body(temperature=float("inf")), "temperature"),
    ("temperature huge", body(temperature=1e308), "temperature"),
    ("top_p high", body(top_p=1.5), "top_p"),
    ("top_p low", body(top_p=-1), "top_p"),
    ("max_tokens string", body(max_tokens="5"), "max_tokens"),
    ("max_tokens fractional", body(max_tokens=1.5), "max_tokens"),
    ("max_tokens huge", body(max_tokens=10**30), "max_tokens"),
    ("max_completion_tokens string", body(max_completion_tokens="5"), "max_completion_tokens"),
    ("stop empty", body(stop=[]), "stop"),
    ("stop 65", body(stop=[str(i) for i in range(65)]), "stop"),
    ("stop number item", body(stop=["a", 1]), "stop"),
    ("stop number", body(stop=5), "stop"),
    ("tools not a list", body(tools={}), "tools"),
    ("tool not an object", body(tools=["f"]), "tools.0"),
    ("tool without function", body(tools=[{"type": "function"}]), "tools.0.function"),
    ("tool without name", body(tools=[{"function": {}}]), "tools.0.function.name"),
    ("tool type number", body(tools=[{"type": 1, "function": {"name": "f"}}]), "tools.0.type"),
    (
        "tool parameters list",
        body(tools=[{"function": {"name": "f", "parameters": []}}]),
        "tools.0.function.parameters",
    ),
    (
        "tool description number",
        body(tools=[{"function": {"name": "f", "description": 1}}]),
        "tools.0.function.description",
    ),
    (
        "tool strict string",
        body(tools=[{"function": {"name": "f", "strict": "yes"}}]),
        "tools.0.function.strict",
    ),
    ("tool_choice unknown", body(tool_choice="sometimes"), "tool_choice"),
    ("tool_choice wrong type", body(tool_choice={"type": "tool", "function": {"name": "f"}}), "tool_choice"),
    ("tool_choice no function", body(tool_choice={"type": "function"}), "tool_choice"),
    ("tool_choice no name", body(tool_choice={"type": "function", "function": {}}), "tool_choice"),
    ("tool_choice number", body(tool_choice=1), "tool_choice"),
    ("response_format unknown", body(response_format={"type": "xml"}), "response_format.type"),
    ("response_format no type", body(response_format={}), "response_format.type"),
    ("response_format string", body(response_format="json_object"), "response_format"),
    (
        "json_schema not object",
        body(response_format={"type": "json_schema", "json_schema": "x"}),
        "response_format.json_schema",
    ),
    ("top_k zero", body(top_k=0), "top_k"),
    ("top_k fractional", body(top_k=1.5), "top_k"),
    ("min_p high", body(min_p=1.1), "min_p"),
    ("seed string", body(seed="1"), "seed"),
    ("seed over int64", body(seed=2**64), "seed"),
    ("presence_penalty high", body(presence_penalty=2.5), "presence_penalty"),
    ("frequency_penalty low", body(frequency_penalty=-2.5), "frequency_penalty"),
    ("repetition_penalty zero", body(repetition_penalty=0), "repetition_penalty"),
    ("logit_bias list", body(logit_bias=[1]), "logit_bias"),
    ("logit_bias value string", body(logit_bias={"42": "x"}), "logit_bias.42"),
    ("logit_bias value bool", body(logit_bias={"42": True}), "logit_bias.42"),
    ("logit_bias value nan", body(logit_bias={"42": float("nan")}), "logit_bias.42"),
    ("logit_bias value huge", body(logit_bias={"42": 10**400}), "logit_bias.42"),
    ("logprobs string", body(logprobs="yes"), "logprobs"),
    ("top_logprobs high", body(top_logprobs=21), "top_logprobs"),
    ("top_logprobs negative", body(top_logprobs=-1), "top_logprobs"),
]


@pytest.mark.parametrize(("b", "path"), [(b, p) for _, b, p in INVALID], ids=[n for n, _, _ in INVALID])
def test_invalid_bodies_name_the_path(b: dict[str, Any], path: str) -> None:
    err = reject(b)
    assert err.param == path
    assert err.message.startswith(f"Invalid request: {path}: ")
    assert err.envelope() == {
        "error": {"message": err.message, "type": "invalid_request_error", "param": path}
    }


def test_non_object_bodies() -> None:
    for b in ([], [USER], "x", "", None, 1, 1.5, True, b"{}"):
        err = reject(b)
        assert err.param is None
        assert err.message == "Invalid request: body: Input should be a JSON object"


def test_at_most_five_issues_in_order() -> None:
    err = reject(
        {
            "messages": [{"role": "user", "content": 1}],
            "temperature": 9,
            "top_p": 9,
            "max_tokens": "x",
            "stop": 1,
            "top_k": 0,
            "seed": "s",
        }
    )
    assert err.param == "messages.0.content"
    issues = err.message.removeprefix("Invalid request: ")
    paths = ["messages.0.content", "temperature", "top_p", "max_tokens", "stop"]
    for p in paths:
        assert f"{p}: " in issues
    assert "top_k" not in issues and "seed" not in issues
    assert issues.index("temperature: ") < issues.index("top_p: ") < issues.index("stop: ")


def test_messages_in_issues_are_readable() -> None:
    assert reject({"messages": [{"role": "robot"}]}).message == (
        "Invalid request: messages.0.role: Input should be one of system, developer, user, assistant, tool, function"
    )
    assert reject({"messages": []}).message == "Invalid request: messages: Array should have at least 1 item"
    assert reject(body(temperature="x")).message == "Invalid request: temperature: Input should be a number"
    assert reject({"messages": [1]}).message == "Invalid request: messages.0: Input should be an object"


def test_error_message_never_echoes_input() -> None:
    secret = "sk-" + "x" * 50
    err = reject(
        body(temperature=secret, model=[secret], messages=[{"role": "user", "content": {"k": secret}}])
    )
    assert secret not in err.message


def test_long_path_parts_are_capped() -> None:
    err = reject(body(logit_bias={"k" * 500: "x"}))
    assert err.param == "logit_bias." + "k" * 64


# ---- normalisation golden cases: input → upstream_body("m", stream=False) ---------------------------

GOLDEN: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "developer→system, strings in parts → text parts",
        {
            "model": "auto",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": ["hello", {"type": "image_url", "image_url": {"url": "data:x"}}]},
            ],
        },
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hello"},
                        {"type": "image_url", "image_url": {"url": "data:x"}},
                    ],
                },
            ],
            "stream": False,
        },
    ),
    (
        "tool calls: ids, type, stringified args; FIFO pairing; function→tool",
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"function": {"name": "a", "arguments": {"x": [1, 2]}}},
                        {"id": "c9", "type": "function", "function": {"name": "b", "arguments": "{}"}},
                        {"type": None, "function": {"name": "c", "arguments": None}},
                    ],
                },
                {"role": "tool", "content": "ra"},
                {"role": "tool", "tool_call_id": "c9", "content": "rb"},
                {"role": "function", "name": "c", "content": None},
            ],
        },
        {
            "model": "m",
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_auto_0",
                            "type": "function",
                            "function": {"name": "a", "arguments": '{"x":[1,2]}'},
                        },
                        {"id": "c9", "type": "function", "function": {"name": "b", "arguments": "{}"}},
                        {
                            "id": "call_auto_1",
                            "type": "function",
                            "function": {"name": "c", "arguments": "{}"},
                        },
                    ],
                    "content": None,
                },
                {"role": "tool", "content": "ra", "tool_call_id": "call_auto_0"},
                {"role": "tool", "content": "rb", "tool_call_id": "c9"},
                {"role": "tool", "content": "", "tool_call_id": "call_auto_1", "name": "c"},
            ],
            "stream": False,
        },
    ),
    (
        "auto ids skip ids the client already uses",
        {
            "messages": [
                USER,
                {"role": "assistant", "tool_calls": [{"function": {"name": "a"}}]},
                {"role": "tool", "content": "r"},
                {"role": "assistant", "tool_calls": [{"id": "call_auto_0", "function": {"name": "b"}}]},
                {"role": "tool", "tool_call_id": "call_auto_0", "content": "r2"},
            ],
        },
        {
            "model": "m",
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_auto_1",
                            "type": "function",
                            "function": {"name": "a", "arguments": "{}"},
                        }
                    ],
                    "content": None,
                },
                {"role": "tool", "content": "r", "tool_call_id": "call_auto_1"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_auto_0",
                            "type": "function",
                            "function": {"name": "b", "arguments": "{}"},
                        }
                    ],
                    "content": None,
                },
                {"role": "tool", "content": "r2", "tool_call_id": "call_auto_0"},
            ],
            "stream": False,
        },
    ),
    (
        "empty assistant turns get '' and lose null/empty tool_calls; orphan tool result kept",
        {
            "messages": [
                USER,
                {"role": "assistant", "content": None, "tool_calls": None},
                {"role": "assistant", "tool_calls": [], "reasoning_content": "hmm"},
                {"role": "assistant", "content": []},
                {"role": "assistant", "content": "kept", "tool_calls": []},
                {"role": "tool", "content": None},
            ],
        },
        {
            "model": "m",
            "messages": [
                USER,
                {"role": "assistant", "content": ""},
                {"role": "assistant", "content": "", "reasoning_content": "hmm"},
                {"role": "assistant", "content": ""},
                {"role": "assistant", "content": "kept"},
                {"role": "tool", "content": ""},
            ],
            "stream": False,
        },
    ),
    (
        "knobs: any→required, tools typed, stop truncated, text format dropped, effort folded",
        body(
            tools=[{"function": {"name": "f", "parameters": {"type": "object"}}}],
            tool_choice="any",
            stop=["1", "2", "3", "4", "5"],
            response_format={"type": "text"},
            reasoning={"effort": "MAX"},
            max_tokens=0,
            max_completion_tokens=77,
            top_k=40,
            seed=1,
        ),
        {
            "model": "m",
            "messages": [USER],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": "required",
            "max_tokens": 77,
            "stop": ["1", "2", "3", "4"],
            "top_k": 40,
            "seed": 1,
            "reasoning_effort": "high",
            "stream": False,
        },
    ),
    (
        "max_tokens wins over max_completion_tokens; flat effort wins over reasoning",
        body(max_tokens=10, max_completion_tokens=20, reasoning_effort=" Off ", reasoning={"effort": "high"}),
        {"model": "m", "messages": [USER], "max_tokens": 10, "reasoning_effort": "none", "stream": False},
    ),
    (
        "unknown effort dropped; json_schema kept; tool_choice without tools dropped",
        body(
            reasoning_effort="turbo",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": {"type": "object"}},
            },
            tool_choice="auto",
            tools=[],
        ),
        {
            "model": "m",
            "messages": [USER],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": {"type": "object"}},
            },
            "stream": False,
        },
    ),
    (
        "unknown fields kept at every level; nulls dropped",
        {
            "messages": [
                {"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}},
                {
                    "role": "assistant",
                    "content": "x",
                    "tool_calls": [{"id": "c", "index": 0, "function": {"name": "f", "arguments": "{}"}}],
                },
            ],
            "n": 2,
            "user": "u1",
            "parallel_tool_calls": False,
            "metadata": {"a": "b"},
            "tools": [{"function": {"name": "f"}, "cache_control": {"type": "ephemeral"}}],
            "service_tier": None,
            "temperature": 0.5,
        },
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}},
                {
                    "role": "assistant",
                    "content": "x",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                            "index": 0,
                        }
                    ],
                },
            ],
            "tools": [
                {"type": "function", "function": {"name": "f"}, "cache_control": {"type": "ephemeral"}}
            ],
            "temperature": 0.5,
            "n": 2,
            "user": "u1",
            "parallel_tool_calls": False,
            "metadata": {"a": "b"},
            "stream": False,
        },
    ),
    (
        "extended knobs forwarded as given",
        body(
            top_p=0.9,
            min_p=0.1,
            presence_penalty=0.5,
            frequency_penalty=-0.5,
            repetition_penalty=1.1,
            logit_bias={"1": 5},
            logprobs=True,
            top_logprobs=3,
            stop="END",
        ),
        {
            "model": "m",
            "messages": [USER],
            "top_p": 0.9,
            "stop": "END",
            "min_p": 0.1,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5,
            "repetition_penalty": 1.1,
            "logit_bias": {"1": 5},
            "logprobs": True,
            "top_logprobs": 3,
            "stream": False,
        },
    ),
]


@pytest.mark.parametrize(("b", "expected"), [(b, e) for _, b, e in GOLDEN], ids=[n for n, _, _ in GOLDEN])
def test_normalisation_golden(b: dict[str, Any], expected: dict[str, Any]) -> None:
    got = parse_chat_request(copy.deepcopy(b)).upstream_body("m", stream=False)
    assert got == expected
    assert orjson.loads(orjson.dumps(got)) == expected


def test_normalised_messages_are_typed() -> None:
    req = parse_chat_request(
        {
            "messages": [
                {"role": "developer", "content": "s"},
                USER,
                {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
                {"role": "function", "name": "f", "content": "r"},
            ]
        }
    )
    kinds = [type(m) for m in req.messages]
    assert kinds == [SystemMessage, UserMessage, AssistantMessage, ToolMessage]
    assert [m.role for m in req.messages] == ["system", "user", "assistant", "tool"]
    tool = req.messages[3]
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "call_auto_0" and tool.name == "f"


def test_numbers_keep_their_json_type() -> None:
    got = parse_chat_request(body(logit_bias={"1": -100, "2": 0.5}, seed=7, max_tokens=64.0)).upstream_body(
        "m", stream=False
    )
    assert orjson.dumps(got["logit_bias"]) == b'{"1":-100,"2":0.5}'
    assert orjson.dumps([got["seed"], got["max_tokens"]]) == b"[7,64]"


def test_stream_options_only_when_sent_and_streaming() -> None:
    req = parse_chat_request(body(stream=True, stream_options={"include_usage": True}))
    assert req.stream is True
    assert req.upstream_body("m", stream=True)["stream_options"] == {"include_usage": True}
    assert "stream_options" not in req.upstream_body("m", stream=False)
    plain = parse_chat_request(body(stream=True))
    assert "stream_options" not in plain.upstream_body("m", stream=True)
    assert plain.upstream_body("m", stream=True)["stream"] is True
    assert parse_chat_request(body(stream=None)).stream is False


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, True),
        ({"stream": False, "stream_options": {"include_usage": False}}, True),
        ({"stream": True}, False),
        ({"stream": True, "stream_options": {}}, False),
        ({"stream": True, "stream_options": {"include_usage": False}}, False),
        ({"stream": True, "stream_options": {"include_usage": "yes"}}, False),
        ({"stream": True, "stream_options": {"include_usage": True}}, True),
    ],
)
def test_include_usage(fields: dict[str, Any], expected: bool) -> None:
    assert parse_chat_request(body(**fields)).include_usage is expected


def test_unknown_top_level_fields_are_kept_on_the_model() -> None:
    req = parse_chat_request(
        body(n=3, user="u", metadata={"k": "v"}, stream_options={"include_usage": False})
    )
    assert req.model_extra == {"n": 3, "user": "u", "metadata": {"k": "v"}}
    assert req.stream_options == {"include_usage": False}


# ---- immutability --------------------------------------------------------------------------------

RICH = {
    "model": "auto",
    "messages": [
        {"role": "developer", "content": ["a", {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": None},
    ],
    "tools": [{"function": {"name": "f", "parameters": {"type": "object"}}}],
    "stop": ["1", "2", "3", "4", "5", "6"],
    "metadata": {"nested": [1, 2]},
    "stream_options": {"include_usage": True},
    "reasoning": {"effort": "low"},
}


def test_parsing_does_not_mutate_the_input() -> None:
    b = copy.deepcopy(RICH)
    parse_chat_request(b).upstream_body("m", stream=True)
    assert b == RICH


def test_upstream_body_does_not_mutate_the_request() -> None:
    req = parse_chat_request(copy.deepcopy(RICH))
    snapshot = req.model_dump()
    first = req.upstream_body("a", stream=True)
    expected_second = copy.deepcopy(req.upstream_body("b", stream=False))
    first["model"] = "changed"
    first["messages"] = []
    first["extra"] = 1
    del first["tools"]
    second = req.upstream_body("b", stream=False)
    assert second == expected_second
    assert second["model"] == "b" and second["stream"] is False and "stream_options" not in second
    assert first is not second
    assert req.model_dump() == snapshot
    assert req.model == "auto" and req.stream is False


def test_request_is_frozen() -> None:
    req = parse_chat_request(body())
    with pytest.raises(ValueError, match="frozen"):
        req.temperature = 1.0


def test_replace_recomputes_derived_values() -> None:
    req = parse_chat_request(body(max_tokens=5))
    assert not req.has_images
    before = req.upstream_body("m", stream=False)
    img = {"role": "user", "content": [{"type": "image", "image": "x"}]}
    new = req.replace(messages=[{"role": "developer", "content": "s"}, *req.messages, img], max_tokens=9)
    assert new.has_images and not req.has_images
    got = new.upstream_body("m", stream=False)
    assert got["messages"][0] == {"role": "system", "content": "s"}
    assert got["max_tokens"] == 9
    assert req.upstream_body("m", stream=False) == before
    copied = req.model_copy(
        update={"tools": parse_chat_request(body(tools=[{"function": {"name": "t"}}])).tools}
    )
    assert copied.tool_schemas == {"t": {}} and req.tool_schemas == {}


# ---- derived properties --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [(None, "auto"), ("", "auto"), ("auto", "auto"), ("AUTO", "auto"), ("auto:", "auto"), (" auto ", "auto"),
     ("auto:fast", "auto:fast"), ("groq:llama", "groq:llama"), ("gpt-4o", "gpt-4o")],
)  # fmt: skip
def test_requested_model(model: str | None, expected: str) -> None:
    assert parse_chat_request(body(model=model)).requested_model == expected


TOOL = {"function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, False),
        ({"tools": None}, False),
        ({"tools": []}, False),
        ({"tools": [TOOL]}, True),
        ({"tools": [TOOL], "tool_choice": "auto"}, True),
        ({"tools": [TOOL], "tool_choice": "any"}, True),
        ({"tools": [TOOL], "tool_choice": "none"}, False),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "f"}}}, True),
    ],
)
def test_wants_tools(fields: dict[str, Any], expected: bool) -> None:
    assert parse_chat_request(body(**fields)).wants_tools is expected


def test_tool_schemas() -> None:
    req = parse_chat_request(body(tools=[TOOL, {"function": {"name": "g"}}]))
    assert req.tool_schemas == {"f": TOOL["function"]["parameters"], "g": {}}
    assert req.tool_schemas is req.tool_schemas  # computed once


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("text", False),
        ([{"type": "text", "text": "x"}], False),
        ([{"type": "image_url", "image_url": {"url": "u"}}], True),
        (["x", {"type": "image", "source": {}}], True),
        ([{"type": ["image_url"]}], False),
    ],
)
def test_has_images(content: Any, expected: bool) -> None:
    assert parse_chat_request({"messages": [{"role": "user", "content": content}]}).has_images is expected


# ---- garbage never raises anything but ClientError -----------------------------------------------


def _deep(n: int) -> Any:
    v: Any = "x"
    for i in range(n):
        v = [v] if i % 2 else {"k": v}
    return v


GARBAGE: list[object] = [
    [],
    "messages",
    None,
    0,
    {"messages": {"0": USER}},
    {"messages": [None]},
    {"messages": [[USER]]},
    {"messages": [{"role": None}]},
    {"messages": [{"role": ["user"], "content": "x"}]},
    {"messages": [{"role": {"x": 1}, "content": "x"}]},
    {"messages": [{"role": "user", "content": [None, {}, []]}]},
    {
        "messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {1: object()}}}]}
        ]
    },
    {
        "messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": _deep(400)}}]}
        ]
    },
    {"messages": [{"role": "user", "content": _deep(2000)}]},
    {"messages": _deep(2000)},
    {1: 2, "messages": [USER]},
    {"messages": [USER], "temperature": 10**400},
    {"messages": [USER], "max_tokens": -(10**400)},
    {"messages": [USER], "top_k": float("nan")},
    {"messages": [USER], "logit_bias": {1: 2}},
    {"messages": [USER], "tool_choice": {"type": "function", "function": {"name": ["f"]}}},
    {"messages": [USER], "response_format": {"type": ["json_object"]}},
    {"messages": [USER], "stop": [["a"]]},
]


@pytest.mark.parametrize("b", GARBAGE, ids=[str(i) for i in range(len(GARBAGE))])
def test_garbage_raises_only_client_error(b: object) -> None:
    reject(b)


def test_nesting_is_bounded_by_what_the_upstream_encoder_can_write() -> None:
    req = parse_chat_request(body(metadata=_deep(200)))
    orjson.dumps(req.upstream_body("m", stream=False))
    raw = '{"messages":[{"role":"user","content":"x"}],"metadata":' + "[" * 500 + "]" * 500 + "}"
    too_deep = orjson.loads(raw)  # the decoder accepts it…
    for b in (too_deep, {"messages": [{"role": "user", "content": [{"type": "x", "k": _deep(300)}]}]}):
        err = reject(b)  # …but it could never be sent upstream
        assert err.message == "Invalid request: body: Input is nested too deeply or is not valid JSON"
        assert err.param is None


JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=8)
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot"])
PART = st.one_of(
    st.text(max_size=5),
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "image"]), "text": JSON}),
    JSON,
)
CONTENT = st.one_of(st.text(max_size=10), st.lists(PART, max_size=3), JSON)
CALL = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.none(), st.text(max_size=4), JSON),
        "type": st.one_of(st.just("function"), JSON),
        "function": st.fixed_dictionaries(
            {}, optional={"name": st.one_of(st.text(max_size=4), JSON), "arguments": JSON}
        )
        | JSON,
    },
)
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES},
    optional={
        "content": CONTENT,
        "name": st.one_of(st.text(max_size=4), JSON),
        "tool_calls": st.one_of(st.none(), st.lists(CALL, max_size=3), JSON),
        "tool_call_id": st.one_of(st.text(max_size=4), JSON),
        "reasoning_content": JSON,
    },
)
KNOBS = [
    *("model", "stream", "stream_options", "temperature", "top_p", "max_tokens", "max_completion_tokens"),
    *("stop", "tools", "tool_choice", "response_format", "top_k", "min_p", "seed", "presence_penalty"),
    *("frequency_penalty", "repetition_penalty", "logit_bias", "logprobs", "top_logprobs"),
    *("reasoning_effort", "reasoning", "n", "user"),
]
KNOB_VALUES = st.one_of(
    JSON,
    st.sampled_from(["none", "auto", "required", "any", "max", "off", "text", "json_object"]),
    st.fixed_dictionaries({"type": st.sampled_from(["function", "text", "json_schema", "json_object"])}),
)
BODY = st.fixed_dictionaries(
    {"messages": st.one_of(st.lists(MESSAGE, max_size=5), JSON)},
    optional={k: KNOB_VALUES for k in KNOBS},
)


def _check_any(b: object) -> None:
    snapshot = copy.deepcopy(b)
    try:
        req = parse_chat_request(b)
    except ClientError as err:
        assert err.status == 400
        assert err.message.startswith("Invalid request: ")
        return
    finally:
        assert repr(b) == repr(snapshot)  # repr: NaN != NaN
    first = req.upstream_body("m1", stream=True)
    second = req.upstream_body("m2", stream=False)
    assert second["model"] == "m2" and first["messages"] == second["messages"]
    orjson.dumps(first)
    _ = (req.wants_tools, req.has_images, req.tool_schemas, req.requested_model, req.text_token_estimate)
    assert all(m.role in ("system", "user", "assistant", "tool") for m in req.messages)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(BODY)
def test_property_structured_bodies(b: dict[str, Any]) -> None:
    _check_any(b)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_property_arbitrary_json(b: object) -> None:
    _check_any(b)
