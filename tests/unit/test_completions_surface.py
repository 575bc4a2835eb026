"""The legacy Completions surface as pure functions: request validation and mapping to the autocomplete
chat prompt, the stream renderer (golden files), and the non-stream body."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from freellm.config import ModelLimits
from freellm.engine.context import Attempt, TurnOutcome
from freellm.engine.pump import PumpResult, StreamPump, ToolCall
from freellm.errors import ClientError
from freellm.routing.catalog import ModelRoute
from freellm.surfaces.openai_completions import (
    AUTOCOMPLETE_SYSTEM_PROMPT,
    CompletionsRenderer,
    autocomplete_messages,
    completion_body,
    completion_id,
    legacy_finish_reason,
    parse_completion_request,
    to_chat_request,
)

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "completions"


def upstream_body(body: dict[str, Any], default_max_tokens: int = 128) -> dict[str, Any]:
    """What an OpenAI-compatible upstream receives for ``body`` (model ``m``)."""
    req = to_chat_request(parse_completion_request(body), default_max_tokens=default_max_tokens)
    return req.upstream_body("m", stream=req.stream)


def refused(body: object) -> ClientError:
    with pytest.raises(ClientError) as info:
        parse_completion_request(body)
    assert info.value.status == 400
    assert info.value.type == "invalid_request_error"
    return info.value


# ---- the autocomplete chat prompt -------------------------------------------------------------------


def test_prompt_and_suffix_become_the_autocomplete_chat_prompt() -> None:
    sent = upstream_body(
        {"model": "auto", "prompt": "def add(a, b):\n    ", "suffix": "\n\nprint(add(1, 2))"}
    )
    assert sent["messages"] == [
        {"role": "system", "content": AUTOCOMPLETE_SYSTEM_PROMPT},
        {
            "role": "user",
            "content": "Prefix before cursor:\ndef add(a, b):\n    \n\n"
            "Suffix after cursor:\n\n\nprint(add(1, 2))\n\n"
            "Completion to insert:",
        },
    ]
    system = AUTOCOMPLETE_SYSTEM_PROMPT.lower()
    assert "code autocomplete engine" in system
    assert "only the text to insert" in system and "no markdown fences" in system


def test_without_a_suffix_the_user_message_has_prefix_and_cue_only() -> None:
    for suffix in (None, ""):
        body: dict[str, Any] = {"prompt": "import "}
        if suffix is not None:
            body["suffix"] = suffix
        user = upstream_body(body)["messages"][1]
        assert user == {"role": "user", "content": "Prefix before cursor:\nimport \n\nCompletion to insert:"}
    assert autocomplete_messages("", None)[1]["content"] == "Prefix before cursor:\n\n\nCompletion to insert:"


def test_a_one_element_prompt_array_is_the_prompt() -> None:
    assert upstream_body({"prompt": ["x = "]}) == upstream_body({"prompt": "x = "})


# ---- max_tokens, stop, sampling ---------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [None, 0, -5, "absent"])
def test_max_tokens_defaults_to_the_setting(max_tokens: Any) -> None:
    body: dict[str, Any] = {"prompt": "x"}
    if max_tokens != "absent":
        body["max_tokens"] = max_tokens
    assert upstream_body(body)["max_tokens"] == 128
    assert upstream_body(body, default_max_tokens=64)["max_tokens"] == 64


def test_a_positive_max_tokens_is_forwarded() -> None:
    assert upstream_body({"prompt": "x", "max_tokens": 12})["max_tokens"] == 12
    assert upstream_body({"prompt": "x", "max_tokens": 12.0})["max_tokens"] == 12


def test_stop_is_forwarded_and_capped_at_four() -> None:
    assert upstream_body({"prompt": "x", "stop": "\n"})["stop"] == "\n"
    assert upstream_body({"prompt": "x", "stop": ["\n\n"]})["stop"] == ["\n\n"]
    many = ["\n", "}", ";", "<|end|>", "<|fim_suffix|>", "<|fim_middle|>"]
    assert upstream_body({"prompt": "x", "stop": many})["stop"] == ["\n", "}", ";", "<|end|>"]
    assert "stop" not in upstream_body({"prompt": "x", "stop": None})


def test_sampling_fields_are_forwarded_unknown_fields_are_not() -> None:
    sent = upstream_body(
        {
            "model": "model-x",
            "prompt": "x",
            "temperature": 0.2,
            "top_p": 0.9,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5,
            "seed": 7,
            "logit_bias": {"50256": -100},
            "user": "u-1",
            "top_k": 40,
            "min_p": 0.05,
            "repetition_penalty": 1.1,
            "n": 1,
            "best_of": 1,
            "echo": False,
            "logprobs": None,
            "suffix": None,
            "some_future_field": {"a": 1},
        }
    )
    assert sent == {
        "model": "m",
        "messages": autocomplete_messages("x", None),
        "max_tokens": 128,
        "temperature": 0.2,
        "top_p": 0.9,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "seed": 7,
        "logit_bias": {"50256": -100},
        "user": "u-1",
        "top_k": 40,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "stream": False,
    }


def test_stream_and_stream_options() -> None:
    req = to_chat_request(
        parse_completion_request({"prompt": "x", "stream": True, "stream_options": {"include_usage": True}}),
        default_max_tokens=128,
    )
    assert req.stream and req.include_usage
    assert req.upstream_body("m", stream=True)["stream_options"] == {"include_usage": True}
    plain = to_chat_request(parse_completion_request({"prompt": "x", "stream": None}), default_max_tokens=128)
    assert plain.stream is False
    # stream_options on a non-stream request is not forwarded
    ns = to_chat_request(
        parse_completion_request({"prompt": "x", "stream_options": {"include_usage": True}}),
        default_max_tokens=128,
    )
    assert "stream_options" not in ns.upstream_body("m", stream=False)


def test_model_is_the_clients() -> None:
    for model, requested in ((None, "auto"), ("auto", "auto"), ("model-x", "model-x")):
        body: dict[str, Any] = {"prompt": "x"}
        if model is not None:
            body["model"] = model
        assert (
            to_chat_request(parse_completion_request(body), default_max_tokens=128).requested_model
            == requested
        )


# ---- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({}, "prompt", "Field required"),
        ({"prompt": None}, "prompt", "required"),
        ({"prompt": 3}, "prompt", "string"),
        ({"prompt": {"text": "x"}}, "prompt", "string"),
        ({"prompt": []}, "prompt", "at least 1"),
        ({"prompt": ["a", "b"]}, "prompt", "one prompt per request"),
        ({"prompt": [1, 2, 3]}, "prompt", "Token-id prompts"),
        ({"prompt": [[1, 2], [3]]}, "prompt", "Token-id prompts"),
        ({"prompt": ["a", 1]}, "prompt", "string"),
        ({"prompt": "x", "suffix": 5}, "suffix", "string"),
        ({"prompt": "x", "max_tokens": "12"}, "max_tokens", "integer"),
        ({"prompt": "x", "max_tokens": 1.5}, "max_tokens", "integer"),
        ({"prompt": "x", "temperature": 3}, "temperature", "less than or equal to 2"),
        ({"prompt": "x", "top_p": -1}, "top_p", "greater than or equal to 0"),
        ({"prompt": "x", "stop": 5}, "stop", "1-64 strings"),
        ({"prompt": "x", "stop": []}, "stop", "1-64 strings"),
        ({"prompt": "x", "stop": ["a"] * 65}, "stop", "1-64 strings"),
        ({"prompt": "x", "stream": "yes"}, "stream", "boolean"),
        ({"prompt": "x", "stream_options": []}, "stream_options", "object"),
        ({"prompt": "x", "n": 2}, "n", "Only 1 is supported"),
        ({"prompt": "x", "n": 0}, "n", "Only 1 is supported"),
        ({"prompt": "x", "n": "2"}, "n", "integer"),
        ({"prompt": "x", "best_of": 3}, "best_of", "Only 1 is supported"),
        ({"prompt": "x", "logprobs": 0}, "logprobs", "Not supported"),
        ({"prompt": "x", "logprobs": 5}, "logprobs", "Not supported"),
        ({"prompt": "x", "echo": "true"}, "echo", "boolean"),
        ({"prompt": "x", "echo": True, "suffix": "y"}, "echo", "suffix"),
        ({"prompt": "x", "logit_bias": {"1": "a"}}, "logit_bias.1", "number"),
        ({"prompt": "x", "seed": True}, "seed", "integer"),
        ({"prompt": "x", "model": 4}, "model", "string"),
    ],
)
def test_bad_input_is_a_400_naming_the_path(body: dict[str, Any], param: str, words: str) -> None:
    err = refused(body)
    assert err.param == param
    assert err.message.startswith(f"Invalid request: {param}: ")
    assert words in err.message
    assert err.envelope() == {
        "error": {"message": err.message, "type": "invalid_request_error", "param": param}
    }


@pytest.mark.parametrize("body", [None, [], "prompt", 3, True, [{"prompt": "x"}]])
def test_a_body_that_is_not_an_object_is_a_400(body: object) -> None:
    err = refused(body)
    assert err.message == "Invalid request: body: Input should be a JSON object"


def test_issues_are_listed_up_to_five() -> None:
    err = refused(
        {"prompt": 1, "suffix": 1, "max_tokens": "a", "temperature": "a", "top_p": "a", "seed": "a"}
    )
    assert err.param == "prompt"
    assert err.message.count(": ") == 6  # the lead-in plus five issues


_JUNK: list[Any] = [None, True, 0, -1, 2**70, 1.5, float("1e308"), "", "x", [], [1], ["a"], [[]], {}, {"a": [1]}]  # fmt: skip
_FIELDS = [
    "model", "prompt", "suffix", "max_tokens", "temperature", "top_p", "stop", "stream", "stream_options", "echo",
    "n", "best_of", "logprobs", "presence_penalty", "frequency_penalty", "seed", "logit_bias", "user", "top_k",
    "min_p", "repetition_penalty",
]  # fmt: skip


def test_any_json_body_is_accepted_or_refused_with_a_400_never_another_error() -> None:
    rng = random.Random(4)
    for _ in range(3000):
        body = {name: rng.choice(_JUNK) for name in rng.sample(_FIELDS, rng.randint(0, len(_FIELDS)))}
        if rng.random() < 0.7:
            body["prompt"] = rng.choice(["x", ["x"], "", None])
        try:
            creq = parse_completion_request(body)
        except ClientError as exc:
            assert exc.status == 400
            continue
        req = to_chat_request(creq, default_max_tokens=128)
        orjson.dumps(req.upstream_body("m", stream=req.stream))


# ---- the stream renderer: golden files --------------------------------------------------------------


def _golden_files() -> list[Path]:
    files = sorted(GOLDEN.glob("*.json"))
    assert files, f"no golden files under {GOLDEN}"
    return files


def _expected_bytes(frames: list[Any]) -> bytes:
    # Frames are stored as objects for readability; key order is the wire's, so re-encoding them
    # compactly gives the exact bytes.
    return b"".join(
        b"data: " + (b"[DONE]" if frame == "[DONE]" else orjson.dumps(frame)) + b"\n\n" for frame in frames
    )


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: p.stem)
def test_renderer_golden(path: Path) -> None:
    case = json.loads(path.read_text())
    options = case["renderer"]
    renderer = CompletionsRenderer(include_usage=options["include_usage"], echo_prompt=options["echo_prompt"])
    assert renderer.content_type == "text/event-stream"
    for n, step in enumerate(case["steps"]):
        if "chunks" in step:
            got = renderer.chunks(copy.deepcopy(step["chunks"]))
        elif "stream_error" in step:
            got = renderer.stream_error(step["stream_error"]["provider"], step["stream_error"]["message"])
        else:
            assert step.get("done") is True
            got = renderer.done()
        assert got == _expected_bytes(step["frames"]), f"{path.name} step {n}"


def test_golden_set_covers_the_required_cases() -> None:
    names = {p.stem for p in _golden_files()}
    assert {"text", "reasoning_text", "error_after_commit"} <= names
    for path in _golden_files():
        case = json.loads(path.read_text())
        frames = [f for step in case["steps"] for f in step["frames"]]
        assert frames[-1] == "[DONE]" and frames.count("[DONE]") == 1, path.name
        for frame in frames:
            if isinstance(frame, dict) and frame.get("choices"):
                assert isinstance(frame["choices"][0]["text"], str)
                assert frame["object"] == "text_completion" and frame["id"].startswith("cmpl-")


# ---- the stream renderer: properties ----------------------------------------------------------------


def _chunk(
    delta: dict[str, Any], finish: str | None = None, *, cid: str = "chatcmpl-a", created: Any = 5
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": "model-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _frames(raw: bytes) -> list[Any]:
    out = []
    for part in raw.decode().split("\n\n"):
        if part:
            assert part.startswith("data: ")
            payload = part[len("data: ") :]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_every_frame_carries_the_first_frames_id_created_and_model() -> None:
    r = CompletionsRenderer()
    raw = r.chunks([_chunk({"content": "a"}, cid="chatcmpl-first", created=10)])
    raw += r.chunks([_chunk({"content": "b"}, cid="chatcmpl-other", created=11)])
    raw += r.chunks([{**_chunk({}, "stop", cid="x"), "model": "else"}])
    frames = _frames(raw)
    assert {(f["id"], f["created"], f["model"]) for f in frames} == {("cmpl-first", 10, "model-x")}


def test_a_chunk_without_created_gets_the_current_time() -> None:
    [frame] = _frames(CompletionsRenderer().chunks([_chunk({"content": "a"}, created=None)]))
    assert isinstance(frame["created"], int) and frame["created"] > 1_600_000_000


def test_usage_is_rendered_only_when_asked_for() -> None:
    usage = {
        "id": "chatcmpl-a",
        "created": 5,
        "model": "model-x",
        "choices": [],
        "usage": {"total_tokens": 3},
    }
    assert CompletionsRenderer().chunks([copy.deepcopy(usage)]) == b""
    [frame] = _frames(CompletionsRenderer(include_usage=True).chunks([copy.deepcopy(usage)]))
    assert frame["choices"] == [] and frame["usage"] == {"total_tokens": 3} and frame["id"] == "cmpl-a"


def test_non_text_content_never_becomes_text() -> None:
    r = CompletionsRenderer()
    assert (
        r.chunks([_chunk({"content": None}), _chunk({"content": ""}), _chunk({"role": "assistant"})]) == b""
    )
    [frame] = _frames(r.chunks([_chunk({"content": None}, "length")]))
    assert frame["choices"][0] == {"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}


def test_echo_goes_on_the_first_frame_even_a_finish_only_one() -> None:
    r = CompletionsRenderer(echo_prompt="x = ")
    frames = _frames(r.chunks([_chunk({}, "stop")]) + r.chunks([_chunk({}, "stop")]))
    assert [f["choices"][0]["text"] for f in frames] == ["x = ", ""]


def test_stream_error_is_one_frame_then_done() -> None:
    frames = _frames(CompletionsRenderer().stream_error("alpha", "cut"))
    assert frames == [
        {"error": {"message": "Provider error (alpha): stream interrupted: cut", "type": "stream_error"}},
        "[DONE]",
    ]
    assert CompletionsRenderer().done() == b"data: [DONE]\n\n"


def test_ids_and_finish_reasons() -> None:
    assert completion_id("chatcmpl-abc") == "cmpl-abc"
    assert completion_id("cmpl-abc") == "cmpl-abc"
    assert completion_id("gen-123") == "cmpl-gen-123"
    assert completion_id("").startswith("cmpl-") and len(completion_id("")) > len("cmpl-")
    assert legacy_finish_reason("tool_calls") == "stop"
    assert legacy_finish_reason("function_call") == "stop"
    for reason in ("stop", "length", "content_filter", None):
        assert legacy_finish_reason(reason) == reason


def test_pump_then_renderer_never_leaks_reasoning_and_text_is_always_a_string() -> None:
    """The real pump in front of the renderer, on a reasoning model's stream."""
    upstream = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"reasoning_content": "secret plan "}),
        _chunk({"reasoning": "more plan"}),
        _chunk({"content": "print("}),
        _chunk({"reasoning_content": "late thought"}),
        _chunk({"content": "'hi')"}),
        _chunk({}, "stop"),
        {"id": "chatcmpl-a", "created": 5, "model": "model-x", "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
    ]  # fmt: skip
    pump = StreamPump("model-x")
    renderer = CompletionsRenderer(include_usage=True)
    raw = b""
    for c in upstream:
        out = pump.feed(copy.deepcopy(c))
        if out:
            raw += renderer.chunks(out)
    raw += renderer.chunks(pump.finish(saw_done=True, include_usage=True)) + renderer.done()
    assert b"plan" not in raw and b"thought" not in raw
    frames = _frames(raw)
    assert frames[-1] == "[DONE]"
    chunks = [f for f in frames if f != "[DONE]"]
    assert "".join(f["choices"][0]["text"] for f in chunks if f["choices"]) == "print('hi')"
    assert all(isinstance(f["choices"][0]["text"], str) for f in chunks if f["choices"])
    assert chunks[0]["choices"][0]["text"] == "print("  # the first frame on the wire is text
    assert [f["choices"][0]["finish_reason"] for f in chunks if f["choices"]] == [None, None, "stop"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 3


# ---- the non-stream body ----------------------------------------------------------------------------


def _outcome(result: PumpResult, *, tokens_in: int = 0, tokens_out: int = 0) -> TurnOutcome:
    route = ModelRoute(
        provider="alpha",
        model="model-x",
        label="alpha/model-x",
        context_window=None,
        tools=True,
        vision=False,
        enabled=True,
        limits=ModelLimits(),
        is_local=False,
    )
    attempt = Attempt(
        number=1, route=route, provider=cast(Any, None), key="k", key_id="kid", key_n=1, lease_id="", trail=[]
    )
    return TurnOutcome(
        attempt=attempt, result=result, ttfb_ms=None, tokens_in=tokens_in, tokens_out=tokens_out
    )


def test_completion_body() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
    result = PumpResult(
        text=" = 42;",
        reasoning="thinking",
        finish_reason="stop",
        usage=usage,
        chunk_id="chatcmpl-up1",
        created=123,
        upstream_model="model-x-2024",
    )
    assert completion_body(_outcome(result)) == {
        "id": "cmpl-up1",
        "object": "text_completion",
        "created": 123,
        "model": "model-x",
        "choices": [{"text": " = 42;", "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": usage,
    }


def test_completion_body_estimates_usage_maps_tool_calls_and_echoes() -> None:
    result = PumpResult(
        text="",
        tool_calls=[ToolCall(id="c", name="f", arguments="{}")],
        finish_reason="tool_calls",
        chunk_id="x1",
        created=1,
    )
    body = completion_body(_outcome(result, tokens_in=7, tokens_out=2), echo_prompt="x = ")
    assert body["id"] == "cmpl-x1"
    assert body["choices"] == [{"text": "x = ", "index": 0, "logprobs": None, "finish_reason": "stop"}]
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    assert "tool" not in orjson.dumps(body).decode()
