"""The Responses surface as pure functions: the stream renderer (golden fixtures), input mapping,
request parsing, the non-stream object, and the stored chain.

* golden fixtures (``tests/golden/responses/*.json``): canonical chunk batches — as the pump releases
  them — in, the exact SSE frames out, with fixed ids (``SequentialIds``). Set
  ``FREELLM_UPDATE_GOLDEN=1`` to rewrite the expected frames after a deliberate change (then review the
  diff). Each fixture is also replayed through the ``openai`` SDK's own stream accumulator, which
  enforces the identity rules (same ids in ``response.completed`` as streamed);
* input items → canonical messages, folding and hoisting;
* the request mapping (tools, tool_choice, text.format, reasoning, max_output_tokens) and its 400s;
* chains through a ``MemoryStore``.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from freellm.engine.pump import PumpResult, ToolCall
from freellm.errors import ClientError
from freellm.store.memory import MemoryStore
from freellm.surfaces.responses.http import responses_error_body
from freellm.surfaces.responses.ids import SequentialIds, random_id
from freellm.surfaces.responses.inputs import input_messages
from freellm.surfaces.responses.objects import ResponseShell, output_from_result, usage_object
from freellm.surfaces.responses.request import (
    assemble_messages,
    build_chat_request,
    parse_responses_request,
)
from freellm.surfaces.responses.state import load_history, output_messages, stored_doc
from freellm.surfaces.responses.stream import ResponsesStreamRenderer

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "responses"
GOLDEN_CASES = sorted(p.stem for p in GOLDEN.glob("*.json"))
NOW = 1_700_000_000.0


def shell(**kw: Any) -> ResponseShell:
    fields: dict[str, Any] = {"id": "resp_golden", "created_at": 1_700_000_000, "model": "auto"}
    fields.update(kw)
    return ResponseShell(**fields)


def render(fx: dict[str, Any]) -> bytes:
    renderer = ResponsesStreamRenderer(shell(), ids=SequentialIds(), input_tokens_estimate=fx["input_tokens_estimate"])
    out = b"".join(renderer.chunks(copy.deepcopy(batch)) for batch in fx["batches"])
    end = fx["end"]
    if end == "done":
        out += renderer.done()
    else:
        out += renderer.stream_error(end["error"]["provider"], end["error"]["message"])
    return out


def parse_frames(raw: bytes) -> list[dict[str, Any]]:
    """``event: X\\ndata: {...}\\n\\n`` frames, checked for shape, as ``{"event", "data"}``."""
    text = raw.decode()
    assert text.endswith("\n\n")
    frames = []
    for block in text[:-2].split("\n\n"):
        event_line, data_line = block.split("\n")
        assert event_line.startswith("event: ") and data_line.startswith("data: ")
        event = event_line[len("event: ") :]
        data = json.loads(data_line[len("data: ") :])
        assert data["type"] == event
        frames.append({"event": event, "data": data})
    return frames


# ---- stream renderer: golden fixtures --------------------------------------------------------------


def test_golden_fixtures_cover_the_required_cases() -> None:
    assert {"text", "reasoning_text", "tool_calls_only", "text_then_tool_calls", "error_after_commit"} <= set(
        GOLDEN_CASES
    )


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_stream_renderer_golden(name: str) -> None:
    path = GOLDEN / f"{name}.json"
    fx = json.loads(path.read_text())
    frames = parse_frames(render(fx))
    if os.environ.get("FREELLM_UPDATE_GOLDEN"):
        fx["frames"] = frames
        path.write_text(json.dumps(fx, indent=2, ensure_ascii=False) + "\n")
    assert frames == fx["frames"]


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_stream_invariants(name: str) -> None:
    fx = json.loads((GOLDEN / f"{name}.json").read_text())
    frames = [f["data"] for f in parse_frames(render(fx))]
    assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
    assert [f["type"] for f in frames[:2]] == ["response.created", "response.in_progress"]
    terminal = frames[-1]
    assert terminal["type"] in ("response.completed", "response.incomplete", "response.failed")
    assert not any(f["type"].startswith("response.") and f["type"] in ("response.completed", "response.failed") for f in frames[:-1])
    # output_index is dense, in opening order; every added item is done (unless the stream failed)
    added = [f for f in frames if f["type"] == "response.output_item.added"]
    done = {f["output_index"]: f["item"] for f in frames if f["type"] == "response.output_item.done"}
    assert [f["output_index"] for f in added] == list(range(len(added)))
    final = terminal["response"]
    assert [item["id"] for item in final["output"]] == [f["item"]["id"] for f in added]
    if terminal["type"] != "response.failed":
        assert final["output"] == [done[i] for i in range(len(added))]
    # the text deltas add up to the message text of the final object
    text = "".join(f["delta"] for f in frames if f["type"] == "response.output_text.delta")
    assert final["output_text"] == text
    assert final["id"] == "resp_golden" and all(f["response"]["id"] == "resp_golden" for f in frames if "response" in f)


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_stream_is_accepted_by_the_openai_sdk_accumulator(name: str) -> None:
    fx = json.loads((GOLDEN / f"{name}.json").read_text())
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=[], text_format=omit)
    for frame in parse_frames(render(fx)):
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=frame["data"]))  # type: ignore[arg-type]
    final = state._completed_response
    if fx["end"] == "done" and fx["frames"][-1]["event"] == "response.completed":
        assert final is not None
        assert [o.id for o in final.output] == [o["id"] for o in fx["frames"][-1]["data"]["response"]["output"]]
        assert final.output_text == fx["frames"][-1]["data"]["response"]["output_text"]


def test_renderer_final_and_on_final_callback() -> None:
    seen: list[dict[str, Any]] = []
    r = ResponsesStreamRenderer(shell(), ids=SequentialIds(), on_final=seen.append)
    r.chunks([{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}])
    assert r.final is None and not seen
    r.chunks([{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}])
    r.done()
    assert seen == [r.final]
    assert r.final is not None and r.final["status"] == "completed" and r.final["output_text"] == "hi"
    assert r.done() == b""  # idempotent
    assert r.stream_error("x", "late") == b""  # nothing after the terminal event


def test_stream_error_before_any_chunk_still_opens_the_response() -> None:
    r = ResponsesStreamRenderer(shell(), ids=SequentialIds())
    frames = [f["data"] for f in parse_frames(r.stream_error("alpha", "gateway shutting down"))]
    assert [f["type"] for f in frames] == ["response.created", "response.in_progress", "response.failed"]
    failed = frames[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"]["message"] == "Provider error (alpha): stream interrupted: gateway shutting down"


def test_text_after_a_tool_call_opens_a_new_message_item() -> None:
    r = ResponsesStreamRenderer(shell(), ids=SequentialIds())
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    r.chunks([{"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}])
    r.chunks([{"choices": [{"index": 0, "delta": {"content": "after"}, "finish_reason": "tool_calls"}]}])
    frames = [f["data"] for f in parse_frames(r.done())]
    assert r.final is not None
    assert [(o["type"], o["id"]) for o in r.final["output"]] == [("function_call", "fc_0001"), ("message", "msg_0002")]
    assert frames[-1]["type"] == "response.completed"


# ---- input items -----------------------------------------------------------------------------------


def test_string_input_is_one_user_message() -> None:
    assert input_messages("hello") == [{"role": "user", "content": "hello"}]


def test_messages_with_and_without_type_and_ids() -> None:
    items = [
        {"role": "user", "content": "a"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "b", "annotations": []}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "c"}, {"type": "input_text", "text": "d"}]},
    ]
    assert input_messages(items) == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c\nd"},
    ]


def test_developer_becomes_system_and_systems_are_hoisted() -> None:
    items = [
        {"role": "user", "content": "q1"},
        {"role": "developer", "content": "dev rules"},
        {"role": "system", "content": [{"type": "input_text", "text": "sys rules"}]},
        {"role": "user", "content": "q2"},
    ]
    messages = input_messages(items)
    assert messages[1] == {"role": "system", "content": "dev rules"}
    assert assemble_messages("be brief", [], messages) == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "dev rules"},
        {"role": "system", "content": "sys rules"},
        {"role": "user", "content": "q1"},
        {"role": "user", "content": "q2"},
    ]


def test_image_parts_become_image_url_parts() -> None:
    items = [
        {"role": "user", "content": [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "high"}},
        ]}
    ]
    assert input_messages(items) == [
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "high"}},
        ]}
    ]


def test_function_calls_fold_into_the_assistant_message_and_outputs_become_tool_messages() -> None:
    items = [
        {"role": "user", "content": "weather in Paris and Oslo?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": {"city": "Oslo"}},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "rain"}]},
        {"type": "function_call", "call_id": "call_3", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_3", "output": {"temp": 3}},
        {"type": "item_reference", "id": "msg_x"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]
    assert input_messages(items) == [
        {"role": "user", "content": "weather in Paris and Oslo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_3", "content": '{"temp":3}'},
    ]


def test_empty_assistant_message_without_calls_is_dropped() -> None:
    items = [{"role": "user", "content": "a"}, {"role": "assistant", "content": []}, {"role": "user", "content": "b"}]
    assert input_messages(items) == [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]


@pytest.mark.parametrize(
    ("value", "param", "status"),
    [
        (5, "input", 400),
        ({"role": "user"}, "input", 400),
        ([3], "input[0]", 400),
        ([{"content": "x"}], "input[0].type", 400),
        ([{"role": "robot", "content": "x"}], "input[0].role", 400),
        ([{"role": "user", "content": 5}], "input[0].content", 400),
        ([{"role": "user"}], "input[0].content", 400),
        ([{"role": "user", "content": [{"type": "input_text", "text": 1}]}], "input[0].content[0].text", 400),
        ([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}], "input[0].content[0].file_id", 422),
        ([{"role": "user", "content": [{"type": "input_file", "file_data": "x"}]}], "input[0].content[0]", 422),
        ([{"type": "function_call", "name": "f"}], "input[0].call_id", 400),
        ([{"type": "function_call", "call_id": "c"}], "input[0].name", 400),
        ([{"type": "function_call_output", "output": "x"}], "input[0].call_id", 400),
        ([{"type": "computer_call", "call_id": "c"}], "input[0].type", 422),
    ],
)
def test_bad_input_items(value: Any, param: str, status: int) -> None:
    with pytest.raises(ClientError) as err:
        input_messages(value)
    assert err.value.status == status
    assert err.value.param == param


# ---- request mapping -------------------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    parsed = parse_responses_request(body)
    return build_chat_request(parsed, []).upstream_body("m", stream=parsed.stream)


def test_request_mapping() -> None:
    body = chat_body(
        {
            "model": "gpt-5-codex",
            "instructions": "You are Codex.",
            "input": "hi",
            "tools": [
                {"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"}, "strict": False},
                {"type": "web_search"},
                {"type": "namespace", "name": "mcp__x", "tools": []},
                {"type": "custom", "name": "apply_patch"},
                {"type": "function"},  # no name: not forwarded
            ],
            "tool_choice": "auto",
            "parallel_tool_calls": False,
            "reasoning": {"effort": "high", "summary": "auto"},
            "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}},
            "max_output_tokens": 300,
            "temperature": 0.5,
            "top_p": 0.9,
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "abc",
            "metadata": {"k": "v"},
            "some_future_field": {"x": 1},
        }
    )
    assert body == {
        "model": "m",
        "messages": [{"role": "system", "content": "You are Codex."}, {"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": "shell", "description": "run", "parameters": {"type": "object"}, "strict": False}}
        ],
        "tool_choice": "auto",
        "temperature": 0.5,
        "top_p": 0.9,
        "max_tokens": 300,
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True}},
        "reasoning_effort": "high",
        "parallel_tool_calls": False,
        "stream": False,
    }


def test_request_defaults_and_json_object() -> None:
    parsed = parse_responses_request({"input": "x", "text": {"format": {"type": "json_object"}}, "stream": True})
    assert parsed.model == "auto" and parsed.store is True and parsed.stream is True
    body = build_chat_request(parsed, []).upstream_body("m", stream=True)
    assert body["response_format"] == {"type": "json_object"}
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body and "tool_choice" not in body


def test_tool_choice_function_and_no_surviving_tools() -> None:
    body = chat_body(
        {"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "f"}}
    )
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    body = chat_body({"input": "x", "tools": [{"type": "web_search"}], "tool_choice": "required"})
    assert "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize(
    ("body", "param", "status"),
    [
        ([], "body", 400),
        ({}, "input", 400),
        ({"input": None}, "input", 400),
        ({"input": "x", "model": 3}, "model", 400),
        ({"input": "x", "stream": "yes"}, "stream", 400),
        ({"input": "x", "instructions": ["a"]}, "instructions", 400),
        ({"input": "x", "previous_response_id": 7}, "previous_response_id", 400),
        ({"input": "x", "tools": {}}, "tools", 400),
        ({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": "x"}]}, "tools[0].parameters", 400),
        ({"input": "x", "tools": [{"type": "computer_use_preview"}]}, "tools[0].type", 422),
        ({"input": "x", "tool_choice": {"type": "web_search"}}, "tool_choice", 400),
        ({"input": "x", "tool_choice": "sometimes"}, "tool_choice", 400),
        ({"input": "x", "max_output_tokens": "many"}, "max_output_tokens", 400),
        ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type", 400),
        ({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}}, "text.format.schema", 400),
        ({"input": "x", "reasoning": "high"}, "reasoning", 400),
        ({"input": "x", "metadata": []}, "metadata", 400),
        ({"input": "x", "metadata": {"deep": _nested(300)}}, "body", 400),
        ({"input": "x", "n": 2**70}, "body", 400),
    ],
)
def test_bad_requests(body: Any, param: str, status: int) -> None:
    with pytest.raises(ClientError) as err:
        chat_body(body)
    assert (err.value.status, err.value.param) == (status, param)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x", "temperature": 3}, "temperature"),
        ({"input": "x", "top_p": -1}, "top_p"),
        ({"input": "x", "max_output_tokens": 2**64 - 1}, "max_output_tokens"),
        ({"input": []}, "input"),
    ],
)
def test_core_validation_errors_name_responses_parameters(body: dict[str, Any], param: str) -> None:
    with pytest.raises(ClientError) as err:
        chat_body(body)
    assert err.value.status == 400
    assert err.value.param == param
    assert f"{param}:" in err.value.message


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
_KEYS = st.sampled_from(
    ["input", "model", "instructions", "tools", "tool_choice", "text", "reasoning", "max_output_tokens",
     "temperature", "top_p", "stream", "store", "previous_response_id", "metadata", "parallel_tool_calls"]
)
_ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "x"]) | _JSON,
        "role": st.sampled_from(["user", "assistant", "system", "developer", "tool"]) | _JSON,
        "content": st.text(max_size=5) | st.lists(
            st.fixed_dictionaries({"type": st.sampled_from(["input_text", "input_image", "refusal", "x"])}, optional={
                "text": _JSON, "image_url": _JSON, "refusal": _JSON, "file_id": _JSON}), max_size=3) | _JSON,
        "call_id": st.text(max_size=4) | _JSON,
        "name": st.text(max_size=4) | _JSON,
        "arguments": _JSON,
        "output": _JSON,
    },
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.dictionaries(_KEYS, _JSON, max_size=6) | _JSON,
    st.none() | st.lists(_ITEM, max_size=5),
)
def test_any_body_is_a_request_or_a_client_error(body: Any, items: list[Any] | None) -> None:
    if isinstance(body, dict) and items is not None:
        body = {**body, "input": items}
    try:
        chat_body(body)
    except ClientError as exc:
        assert 400 <= exc.status < 500


def test_error_body_has_the_responses_shape() -> None:
    err = ClientError(404, "Response with id 'resp_x' not found.")
    assert responses_error_body(err) == {
        "error": {"message": "Response with id 'resp_x' not found.", "type": "invalid_request_error", "param": None, "code": None}
    }


# ---- the non-stream object -------------------------------------------------------------------------


def test_output_from_result_orders_reasoning_message_calls() -> None:
    result = PumpResult(
        text="Calling.",
        reasoning="hmm",
        tool_calls=[ToolCall(id="call_9", name="f", arguments='{"a":1}')],
        finish_reason="tool_calls",
    )
    assert output_from_result(result, SequentialIds()) == [
        {"id": "rs_0001", "type": "reasoning", "status": "completed", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
        {"id": "msg_0002", "type": "message", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]},
        {"id": "fc_0003", "type": "function_call", "status": "completed", "arguments": '{"a":1}', "call_id": "call_9", "name": "f"},
    ]


def test_response_object_fields() -> None:
    s = shell(instructions="x", previous_response_id="resp_prev", store=False,
              echo={"tools": [{"type": "web_search"}], "max_output_tokens": 5, "metadata": {"a": "b"}})
    out = s.build("incomplete", [], usage=None, incomplete_reason="max_output_tokens")
    assert out["object"] == "response" and out["status"] == "incomplete"
    assert out["incomplete_details"] == {"reason": "max_output_tokens"}
    assert (out["instructions"], out["previous_response_id"], out["store"]) == ("x", "resp_prev", False)
    assert out["tools"] == [{"type": "web_search"}] and out["max_output_tokens"] == 5 and out["metadata"] == {"a": "b"}
    assert out["output_text"] == "" and out["tool_choice"] == "auto" and out["parallel_tool_calls"] is True


def test_usage_mapping() -> None:
    up = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
          "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2}}
    assert usage_object(up, input_estimate=1, output_estimate=1) == {
        "input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
        "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15,
    }
    est = usage_object({"prompt_tokens": 0, "completion_tokens": 3}, input_estimate=7, output_estimate=9, reasoning_chars=8)
    assert est["input_tokens"] == 7 and est["output_tokens"] == 3 and est["total_tokens"] == 10
    assert est["output_tokens_details"] == {"reasoning_tokens": 2}
    assert usage_object(None, input_estimate=2, output_estimate=3)["total_tokens"] == 5


def test_random_ids_have_prefix_and_are_unique() -> None:
    a, b = random_id("resp"), random_id("resp")
    assert a.startswith("resp_") and len(a) == 5 + 48 and a != b


# ---- stored chain ----------------------------------------------------------------------------------


async def put(store: MemoryStore, rid: str, prev: str | None, input_text: str, answer: str, **kw: Any) -> None:
    output = [{"id": f"msg_{rid}", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": answer, "annotations": []}]}]
    response = shell(id=rid, previous_response_id=prev, instructions=f"instr {rid}").build("completed", output)
    doc = stored_doc(response, [{"role": "user", "content": input_text}, *kw.get("extra", [])])
    await store.put_response(rid, doc, kw.get("expires_at", NOW + 100))


async def test_history_follows_the_chain_oldest_first() -> None:
    store = MemoryStore()
    await put(store, "resp_1", None, "q1", "a1", extra=[{"role": "system", "content": "dev"}])
    await put(store, "resp_2", "resp_1", "q2", "a2")
    await put(store, "resp_3", "resp_2", "q3", "a3")
    history = await load_history(store, "resp_3", now=NOW, max_depth=256)
    assert history == [
        {"role": "user", "content": "q1"}, {"role": "system", "content": "dev"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"}, {"role": "assistant", "content": "a3"},
    ]
    # instructions of stored responses are never part of the history
    assert not any("instr" in str(m["content"]) for m in history)
    assert await load_history(store, "resp_3", now=NOW, max_depth=2) == history[3:]


async def test_history_unknown_previous_is_404_and_missing_ancestor_truncates() -> None:
    store = MemoryStore()
    with pytest.raises(ClientError) as err:
        await load_history(store, "resp_nope", now=NOW, max_depth=10)
    assert err.value.status == 404 and err.value.code == "previous_response_not_found"
    assert err.value.param == "previous_response_id"
    await put(store, "resp_2", "resp_gone", "q2", "a2")
    assert await load_history(store, "resp_2", now=NOW, max_depth=10) == [
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}
    ]
    await put(store, "resp_old", None, "q", "a", expires_at=NOW - 1)
    with pytest.raises(ClientError):
        await load_history(store, "resp_old", now=NOW, max_depth=10)


def test_output_messages_from_items() -> None:
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
        {"type": "message", "id": "m", "role": "assistant", "content": [{"type": "output_text", "text": "t", "annotations": []}]},
        {"type": "function_call", "id": "fc", "call_id": "call_1", "name": "f", "arguments": "{}"},
    ]
    assert output_messages(items) == [
        {"role": "assistant", "content": "t",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    ]
    assert output_messages([]) == []
