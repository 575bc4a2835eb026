"""The Ollama surface's pure parts: request mapping and the NDJSON renderer (no gateway, no network)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from freellm.core.chunks import make_chunk, make_usage_chunk
from freellm.errors import ClientError
from freellm.surfaces.ollama.mapping import (
    GENERATE_SUFFIX_INSTRUCTION,
    chat_request,
    generate_request,
    image_data_url,
    requested_route,
)
from freellm.surfaces.ollama.render import OllamaRenderer, load_body
from freellm.surfaces.ollama.wire import ChatBody, GenerateBody, parse_body


def chat(**fields: Any) -> ChatBody:
    return parse_body(ChatBody, {"model": "auto", **fields})


def wire_messages(body: ChatBody) -> list[dict[str, Any]]:
    return [m.wire() for m in chat_request(body, default_max_tokens=1024).messages]


@pytest.mark.parametrize(
    ("raw", "route"), [("", "auto"), ("  ", "auto"), ("llama3:latest", "llama3"), (":latest", ":latest"), ("a/b", "a/b")]
)
def test_requested_route(raw: str, route: str) -> None:
    assert requested_route(raw) == route


@pytest.mark.parametrize(
    ("head", "media"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 16, "image/png"),
        (b"\xff\xd8\xff\xe0" + b"\0" * 16, "image/jpeg"),
        (b"GIF89a" + b"\0" * 16, "image/gif"),
        (b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 8, "image/webp"),
        (b"unknown bytes here......", "image/png"),
    ],
)
def test_image_type_is_read_from_its_bytes(head: bytes, media: str) -> None:
    b64 = base64.b64encode(head).decode()
    assert image_data_url(b64) == f"data:{media};base64,{b64}"


def test_tool_results_pair_by_id_then_name_then_oldest() -> None:
    body = chat(
        messages=[
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "a", "arguments": {"x": 1}}},
                    {"function": {"name": "b", "arguments": {"y": [1, 2]}}},
                    {"id": "mine", "function": {"name": "c", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "mine", "content": "C"},
            {"role": "tool", "tool_name": "b", "content": "B"},
            {"role": "tool", "content": "A"},
            {"role": "tool", "content": "orphan"},
        ]
    )
    messages = wire_messages(body)
    calls = messages[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "call_2", "mine"]
    assert [c["function"]["arguments"] for c in calls] == ['{"x":1}', '{"y":[1,2]}', "{}"]
    assert [(m.get("tool_call_id"), m["content"]) for m in messages[2:5]] == [("mine", "C"), ("call_2", "B"), ("call_1", "A")]
    assert messages[5] == {"role": "user", "content": "Tool result:\norphan"}  # kept, never dropped


def test_options_format_and_think_map_onto_the_chat_request() -> None:
    req = chat_request(
        chat(
            messages=[{"role": "user", "content": "hi"}],
            options={"num_predict": -1, "temperature": 0, "stop": "END", "repeat_penalty": 1.1, "num_ctx": 8192},
            format="json",
            think="high",
            stream=False,
        ),
        default_max_tokens=1024,
    )
    assert req.max_tokens == 1024  # negative = until done: the configured cap
    assert req.temperature == 0 and req.stop == ["END"] and req.repetition_penalty == 1.1
    assert req.response_format is not None and req.response_format.type == "json_object"
    assert req.reasoning_effort == "high" and req.stream is False


def test_generate_builds_system_prompt_and_fill_in_the_middle() -> None:
    req = generate_request(
        parse_body(GenerateBody, {"model": "m", "prompt": "def f():", "suffix": "return x", "system": "code only"}),
        default_max_tokens=64,
    )
    messages = [m.wire() for m in req.messages]
    assert messages[0] == {"role": "system", "content": "code only"}
    assert messages[1]["content"] == f"def f():\n\n{GENERATE_SUFFIX_INSTRUCTION}return x"
    assert req.max_tokens == 64 and req.stream is True


@pytest.mark.parametrize(
    "body",
    [{"messages": [{"role": "user", "content": 3}]}, {"options": {"top_k": 0}}, {"think": "max"}, {"keep_alive": []}],
)
def test_wrong_types_are_400s_naming_the_field(body: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as err:
        parse_body(ChatBody, {"model": "auto", **body})
    assert err.value.status == 400 and err.value.message.startswith("invalid request: ")


def test_load_answers() -> None:
    chat_load = load_body("llama3", "chat", unload=False)
    assert chat_load["message"] == {"role": "assistant", "content": ""} and chat_load["done_reason"] == "load"
    assert load_body("m", "generate", unload=True)["done_reason"] == "unload"


def ticking() -> Iterator[int]:
    t = 0
    while True:
        yield t
        t += 1_000_000  # each read of the clock: 1 ms later


def render(renderer: OllamaRenderer, *batches: list[Any]) -> list[dict[str, Any]]:
    data = b"".join(renderer.chunks(batch) for batch in batches) + renderer.done()
    return [orjson.loads(line) for line in data.splitlines()]


def test_renderer_lines_for_text_thinking_tool_calls_and_the_final_stats() -> None:
    clock = ticking()
    renderer = OllamaRenderer("qwen3", "chat", clock=lambda: next(clock))
    lines = render(
        renderer,
        [make_chunk("c1", 1, "m", {"role": "assistant", "reasoning_content": "hmm"})],
        [make_chunk("c1", 1, "m", {"content": "Hi"})],
        [
            make_chunk("c1", 1, "m", {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "f", "arguments": '{"a"'}}]}),
            make_chunk("c1", 1, "m", {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
            make_chunk("c1", 1, "m", {}, finish_reason="tool_calls"),
            make_usage_chunk("c1", 1, "m", {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}),
        ],
    )
    assert [line["message"] for line in lines[:3]] == [
        {"role": "assistant", "content": "", "thinking": "hmm"},
        {"role": "assistant", "content": "Hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
    ]
    final = lines[3]
    assert final["done"] is True and final["done_reason"] == "stop"
    assert final["prompt_eval_count"] == 12 and final["eval_count"] == 5
    assert final["total_duration"] == final["prompt_eval_duration"] + final["eval_duration"]
    assert all(line["model"] == "qwen3" for line in lines)


def test_renderer_for_generate_hides_thinking_when_asked_and_reports_length() -> None:
    renderer = OllamaRenderer("m", "generate", show_thinking=False)
    lines = render(
        renderer,
        [make_chunk("c", 1, "m", {"reasoning_content": "secret"}), make_chunk("c", 1, "m", {"content": "Once"}, finish_reason="length")],
    )
    assert lines[0] == {**lines[0], "response": "Once", "done": False} and "thinking" not in lines[0]
    assert lines[-1]["done_reason"] == "length" and lines[-1]["context"] == [] and lines[-1]["response"] == ""
    error = orjson.loads(renderer.stream_error("alpha", "stream interrupted"))
    assert error == {"error": "provider error (alpha): stream interrupted", "done": True}
