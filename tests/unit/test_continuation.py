"""The pure parts of mid-stream continuation: the prefill trimmer, the splice filter, the marker and
the summed usage, and when a pump's answer can be continued at all."""

from __future__ import annotations

import pytest

from freellm.core.chunks import make_chunk
from freellm.engine.continuation import (
    ContinuationFilter,
    PrefillTrimmer,
    Resume,
    can_continue,
    spliced,
    summed_usage,
)
from freellm.engine.pump import StreamPump
from freellm.errors import UpstreamError

RESUME = Resume(
    text="The quick brown fox", chunk_id="chatcmpl-1", created=7, model="m", origin="a/m",
    prompt_tokens=10, completion_tokens=5, ttfb_ms=12,
)


def trimmed(prefill: str, pieces: list[str]) -> str:
    trimmer = PrefillTrimmer(prefill)
    return "".join(trimmer.feed(p) for p in pieces) + trimmer.finish()


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        ([" jumps", " over."], " jumps over."),  # a clean continuation passes (after the window)
        (["The quick ", "brown fox", " jumps."], " jumps."),  # the whole answer started over
        (["brown fox", " jumps."], " jumps."),  # the cut sentence's end repeated
        (["The qu"], ""),  # only part of the prefill again, then the end
        (["fox jumps."], "fox jumps."),  # a 3-character overlap is coincidence, kept
        ([], ""),
    ],
)
def test_trimmer(pieces: list[str], expected: str) -> None:
    assert trimmed("The quick brown fox", pieces) == expected


def test_trimmer_holds_no_more_than_its_window() -> None:
    trimmer = PrefillTrimmer("x" * 500)
    assert trimmer.feed("y" * 63) == ""
    assert trimmer.feed("y") == "y" * 64  # decided: no repeat
    assert trimmer.feed("z") == "z"


def test_an_empty_prefill_trims_nothing() -> None:
    assert trimmed("", ["abc"]) == "abc"


def test_filter_keeps_the_stream_identity_and_drops_role_and_reasoning() -> None:
    splice = ContinuationFilter(RESUME)
    chunk = make_chunk("other-id", 99, "n", {"role": "assistant", "reasoning_content": "hmm", "content": " jumps over the lazy dog and keeps running far"})
    out = splice.chunk(chunk)
    assert out["id"] == "chatcmpl-1" and out["created"] == 7
    assert out["choices"][0]["delta"] == {"content": " jumps over the lazy dog and keeps running far"}
    assert splice.rest("m") is None


def test_filter_flushes_held_text_as_a_last_chunk() -> None:
    splice = ContinuationFilter(RESUME)
    out = splice.chunk(make_chunk("x", 1, "n", {"content": " jumps."}))
    assert out["choices"][0]["delta"]["content"] == ""
    rest = splice.rest("m")
    assert rest is not None and rest["choices"][0]["delta"]["content"] == " jumps." and rest["id"] == "chatcmpl-1"


def test_spliced_marks_the_finish_and_sums_usage_without_touching_the_pumps_copy() -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
    out = [make_chunk("c", 1, "m", {}, "stop"), {"id": "c", "choices": [], "usage": usage}]
    spliced(out, RESUME, "b/m")
    assert out[0]["x_freellm"] == {"continued_from": "a/m", "continued_on": "b/m"}
    assert out[1]["usage"] == {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}
    assert usage["total_tokens"] == 43
    assert summed_usage({}, RESUME) == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def test_only_a_death_is_continued() -> None:
    assert can_continue(UpstreamError("cut", transport=True))
    assert can_continue(UpstreamError("stalled", timeout=True))
    assert not can_continue(UpstreamError("in-band provider error: overloaded"))


def test_a_pump_streaming_a_tool_call_cannot_be_continued() -> None:
    pump = StreamPump("m")
    pump.feed(make_chunk("c", 1, "m", {"content": "Sure."}))
    assert pump.can_resume and pump.sent_text == "Sure."
    pump.feed(make_chunk("c", 1, "m", {"tool_calls": [{"index": 0, "id": "t", "function": {"name": "f", "arguments": "{"}}]}))
    assert not pump.can_resume


def test_a_resumed_pump_passes_text_and_may_add_nothing() -> None:
    pump = StreamPump("m", think_tags=False)
    pump.resume()
    assert pump.committed
    assert pump.feed(make_chunk("c", 1, "m", {"content": "<think>"}))[0]["choices"][0]["delta"]["content"] == "<think>"
    empty = StreamPump("m", think_tags=False)
    empty.resume()
    assert empty.finish(saw_done=True)[-1]["choices"][0]["finish_reason"] == "stop"
