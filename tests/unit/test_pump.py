"""The streaming pump as a pure state machine: golden chunk sequences in, client chunks out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from freellm.engine.pump import Rescue, StreamPump, ToolCall
from freellm.errors import UpstreamError


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "id": "chatcmpl-up",
        "object": "chat.completion.chunk",
        "created": 123,
        "model": "upstream-model",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    c.update(extra)
    return c


def run(pump: StreamPump, frames: list[dict[str, Any]], *, saw_done: bool = True) -> list[list[dict[str, Any]]]:
    """Feed every frame; return the batches the pump released (the last one from finish)."""
    batches = [pump.feed(copy.deepcopy(f)) for f in frames]
    batches.append(pump.finish(saw_done=saw_done))
    return batches


def flat(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [c for b in batches for c in b]


def contents(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_holds_role_and_reasoning_until_first_content() -> None:
    pump = StreamPump("model-x")
    batches = run(
        pump,
        [
            chunk({"role": "assistant"}),
            chunk({"reasoning_content": "think"}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo"}),
            chunk({}, finish="stop"),
        ],
    )
    assert batches[0] == [] and batches[1] == []
    assert [c["choices"][0]["delta"] for c in batches[2]] == [
        {"role": "assistant"},
        {"reasoning_content": "think"},
        {"content": "Hel"},
    ]
    assert pump.committed
    out = flat(batches)
    assert contents(out) == "Hello"
    assert all(c["model"] == "model-x" for c in out)
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
    assert sum(1 for c in out if c["choices"] and c["choices"][0]["finish_reason"]) == 1


def test_reasoning_alone_never_commits_and_is_an_empty_completion() -> None:
    pump = StreamPump("m")
    assert pump.feed(chunk({"reasoning": "hmm"})) == []
    assert not pump.committed and pump.first_token
    with pytest.raises(UpstreamError, match="empty completion"):
        pump.finish(saw_done=True)


def test_inband_error_before_commit_raises() -> None:
    pump = StreamPump("m")
    pump.feed(chunk({"role": "assistant"}))
    with pytest.raises(UpstreamError, match="in-band provider error: overloaded"):
        pump.feed({"error": {"message": "overloaded", "type": "server_error"}})
    assert not pump.committed


def test_inband_error_after_commit_raises_with_committed_flag() -> None:
    pump = StreamPump("m")
    assert pump.feed(chunk({"content": "partial"}))
    with pytest.raises(UpstreamError):
        pump.feed({"error": {"message": "boom"}})
    assert pump.committed


def test_tool_call_fragments_become_one_complete_chunk_then_finish_then_usage() -> None:
    pump = StreamPump("m", wants_tools=True)
    frames = [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Oslo"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"name": "get_time", "arguments": "{}"}}]}),
        chunk({}, finish="tool_calls"),
        {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 1, "model": "u", "choices": [],
         "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}},
    ]
    out = flat(run(pump, frames))
    with_calls = [c for c in out if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    assert len(with_calls) == 1
    calls = with_calls[0]["choices"][0]["delta"]["tool_calls"]
    generated = calls[1]["id"]  # the upstream gave none: a fresh, unique call_… id
    assert generated.startswith("call_") and len(generated) == len("call_") + 24
    assert calls == [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        {"index": 1, "id": generated, "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert out[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert out[-1]["choices"] == [] and out[-1]["usage"]["total_tokens"] == 12
    assert out.index(with_calls[0]) < len(out) - 2
    assert pump.result().tool_calls == [
        ToolCall("call_1", "get_weather", '{"city":"Oslo"}'),
        ToolCall(generated, "get_time", "{}"),
    ]


def test_usage_on_last_content_frame_is_emitted_once_after_finish() -> None:
    pump = StreamPump("m")
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    out = flat(run(pump, [chunk({"content": "a"}), chunk({"content": "b"}, finish="stop", usage=usage)]))
    usage_frames = [c for c in out if c.get("usage")]
    assert len(usage_frames) == 1 and out[-1] is usage_frames[0]
    assert out[-2]["choices"][0]["finish_reason"] == "stop"
    assert contents(out) == "ab"


def test_missing_finish_reason_becomes_stop() -> None:
    out = flat(run(StreamPump("m"), [chunk({"content": "x"})]))
    assert out[-1]["choices"][0]["finish_reason"] == "stop"


def test_upstream_length_is_kept() -> None:
    out = flat(run(StreamPump("m"), [chunk({"content": "x"}, finish="length")]))
    assert out[-1]["choices"][0]["finish_reason"] == "length"


def test_eof_without_done_or_finish_is_retryable_transport_error() -> None:
    pump = StreamPump("m")
    pump.feed(chunk({"role": "assistant"}))
    with pytest.raises(UpstreamError, match="stream ended unexpectedly") as info:
        pump.finish(saw_done=False)
    assert info.value.transport


def test_eof_without_done_but_with_finish_is_clean() -> None:
    out = flat(run(StreamPump("m"), [chunk({"content": "x"}, finish="stop")], saw_done=False))
    assert contents(out) == "x"


def test_empty_completion_with_length_is_skip_bench() -> None:
    pump = StreamPump("m")
    pump.feed(chunk({"role": "assistant"}, finish="length"))
    with pytest.raises(UpstreamError, match="empty completion") as info:
        pump.finish(saw_done=True)
    assert info.value.skip_bench


def test_array_content_is_flattened() -> None:
    out = flat(run(StreamPump("m"), [chunk({"content": [{"type": "text", "text": "hi"}, " there"]})]))
    assert contents(out) == "hi there"


@pytest.mark.parametrize(
    ("pieces", "held_until"),
    [
        (["Hello", " world"], 0),  # cannot become a marker: released at once
        (["<", "b>bold</b>"], 1),  # '<' could start a marker; '<b' cannot
        (["  ", "\n", "Sure"], 2),  # blank text is held until something decides
    ],
)
def test_with_tools_text_is_held_only_while_it_could_be_a_marker(pieces: list[str], held_until: int) -> None:
    pump = StreamPump("m", wants_tools=True)
    released_at = None
    for i, piece in enumerate(pieces):
        if pump.feed(chunk({"content": piece})):
            released_at = i
            break
    assert released_at == held_until
    assert pump.mode == "passthrough"


def test_dialect_marker_switches_to_dialect_and_uses_the_rescue() -> None:
    def rescue(text: str) -> Rescue:
        assert text.startswith("<tool_call>")
        return Rescue(calls=[ToolCall("call_rescued_0", "f", "{}")], clean_text="")

    pump = StreamPump("m", wants_tools=True, rescue=rescue)
    for piece in ["<tool", "_call>", '{"name":"f","arguments":{}}', "</tool_call>"]:
        assert pump.feed(chunk({"content": piece})) == []
    assert pump.mode == "dialect"
    out = pump.finish(saw_done=True)
    assert "<tool_call>" not in contents(out)
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_unparseable_dialect_is_a_dead_turn() -> None:
    pump = StreamPump("m", wants_tools=True)
    pump.feed(chunk({"content": "<function=broken"}))
    with pytest.raises(UpstreamError, match="unparseable inline tool-call dialect"):
        pump.finish(saw_done=True)
    assert not pump.committed


def test_markers_are_ignored_without_tools() -> None:
    pump = StreamPump("m", wants_tools=False)
    assert pump.feed(chunk({"content": "<tool_call>"}))
    assert pump.mode == "passthrough"


def test_hold_limit_releases_a_marker_prefix_longer_than_the_limit() -> None:
    pump = StreamPump("m", wants_tools=True, hold_limit=4)
    assert pump.feed(chunk({"content": "<to"})) == []
    assert contents(pump.feed(chunk({"content": "ol"}))) == "<tool"
    assert pump.mode == "passthrough"


def test_include_usage_synthesises_usage_when_upstream_sent_none() -> None:
    pump = StreamPump("m")
    pump.feed(chunk({"content": "abcd"}))
    out = pump.finish(saw_done=True, include_usage=True, usage_estimate=1)
    assert out[-1]["usage"]["completion_tokens"] == 1


def test_synthetic_chunks_reuse_upstream_id_and_created() -> None:
    out = flat(run(StreamPump("m"), [chunk({"content": "x"})]))
    assert {c["id"] for c in out} == {"chatcmpl-up"}
    assert {c["created"] for c in out} == {123}


# ---- reasoning signatures ----------------------------------------------------------------------------


def test_signature_only_chunk_waits_in_the_preamble_and_never_commits() -> None:
    pump = StreamPump("m")
    assert pump.feed(chunk({"role": "assistant"})) == []
    assert pump.feed(chunk({"reasoning_signature": "sig-1"})) == []
    assert not pump.committed and not pump.first_token  # a signature is not a token
    assert pump.feed(chunk({"reasoning_content": "think"})) == []
    assert not pump.committed and pump.first_token
    released = pump.feed(chunk({"content": "Hi"}))
    assert [c["choices"][0]["delta"] for c in released] == [
        {"role": "assistant"},
        {"reasoning_signature": "sig-1"},
        {"reasoning_content": "think"},
        {"content": "Hi"},
    ]
    pump.finish(saw_done=True)
    result = pump.result()
    assert (result.text, result.reasoning, result.reasoning_signature) == ("Hi", "think", "sig-1")


def test_signature_alone_is_still_an_empty_completion() -> None:
    pump = StreamPump("m")
    assert pump.feed(chunk({"reasoning_content": "hmm"})) == []
    assert pump.feed(chunk({"reasoning_signature": "sig"})) == []
    assert not pump.committed
    with pytest.raises(UpstreamError, match="empty completion"):
        pump.finish(saw_done=True)


def test_signature_after_commit_is_passed_on_and_is_never_text() -> None:
    pump = StreamPump("m")
    out = flat(
        run(
            pump,
            [
                chunk({"content": "Answer"}),
                chunk({"reasoning_content": "late"}),
                chunk({"reasoning_signature": "sig-late"}),
                chunk({}, finish="stop"),
            ],
        )
    )
    assert {"reasoning_signature": "sig-late"} in [c["choices"][0]["delta"] for c in out if c["choices"]]
    assert contents(out) == "Answer"
    assert pump.result().text == "Answer" and pump.result().reasoning_signature == "sig-late"
    assert pump.output_chars == len("Answer") + len("late")


@pytest.mark.parametrize(
    ("signatures", "expected"),
    [
        ([], ""),
        (["a"], "a"),
        (["a", "a"], "a"),  # the same signature repeated (e.g. a block start and its delta)
        (["a", "b"], ""),  # two signed blocks: one reasoning text cannot carry both
        (["a", ""], ""),  # e.g. a redacted_thinking block after the signed one
        (["", "a"], ""),
    ],
)
def test_one_signature_per_turn(signatures: list[str], expected: str) -> None:
    pump = StreamPump("m")
    frames = [chunk({"reasoning_content": "r"})]
    frames += [chunk({"reasoning_signature": s}) for s in signatures]
    run(pump, [*frames, chunk({"content": "x"}, finish="stop")])
    assert pump.result().reasoning_signature == expected


def test_signature_with_held_text_goes_out_with_the_preamble() -> None:
    # A whole answer held (non-stream): the signature in a chunk that also carries content is kept.
    pump = StreamPump("m", hold_all=True)
    out = flat(
        run(pump, [chunk({"role": "assistant", "content": "Done.", "reasoning_content": "r", "reasoning_signature": "s"}, finish="stop")])
    )
    deltas = [c["choices"][0]["delta"] for c in out if c["choices"]]
    assert deltas[0] == {"role": "assistant", "reasoning_content": "r", "reasoning_signature": "s"}
    assert contents(out) == "Done."
    assert pump.result().reasoning_signature == "s"
