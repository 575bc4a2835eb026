"""The suite's judge, on hand-written streams: a profile can only pass for the right reason if a broken
stream is really told apart from one ended in-band, on every surface."""

from __future__ import annotations

import orjson
import pytest

from tests.reliability.client import TEXT, Call, Result, Surface, Verdict, _judge_body, _StreamState
from tests.reliability.profiles import profile
from tests.reliability.runner import tally

pytestmark = pytest.mark.reliability

HALF = TEXT[:20]


def _frames(surface: Surface, text: str, ending: str) -> list[tuple[str, str]]:
    """A stream of ``text`` in one delta, ended ``ok`` (normally), ``error`` (in-band) or ``none``."""
    if surface == "chat":
        out = [
            ("", orjson.dumps({"choices": [{"delta": {"content": text}, "finish_reason": None}]}).decode())
        ]
        if ending == "ok":
            out += [("", '{"choices":[{"delta":{},"finish_reason":"stop"}]}'), ("", "[DONE]")]
        elif ending == "error":
            out += [("", '{"error":{"message":"stream interrupted","type":"stream_error"}}'), ("", "[DONE]")]
        return out
    if surface == "messages":
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
        out = [("content_block_delta", orjson.dumps(delta).decode())]
        if ending == "ok":
            out += [
                ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn"}}'),
                ("message_stop", '{"type":"message_stop"}'),
            ]
        elif ending == "error":
            out += [("error", '{"type":"error","error":{"type":"api_error","message":"x"}}')]
        return out
    if surface == "responses":
        out = [("", orjson.dumps({"type": "response.output_text.delta", "delta": text}).decode())]
        if ending == "ok":
            done = {"type": "response.completed", "response": {"output_text": text}}
            out += [("", orjson.dumps(done).decode())]
        elif ending == "error":
            out += [("", '{"type":"response.failed","response":{"status":"failed"}}')]
        return out
    part = {"candidates": [{"content": {"parts": [{"text": text}]}}]}
    out = [("", orjson.dumps(part).decode())]
    if ending == "ok":
        out += [("", '{"candidates":[{"content":{"parts":[]},"finishReason":"STOP"}]}')]
    elif ending == "error":
        out += [("", '{"error":{"code":502,"message":"x","status":"UNAVAILABLE"}}')]
    return out


def _judge(surface: Surface, frames: list[tuple[str, str]], broken: str = "") -> Verdict:
    state = _StreamState()
    for event, data in frames:
        state.feed(surface, event, data)
    state.broken = state.broken or broken
    return state.judge()[0]


SURFACES: list[Surface] = ["chat", "messages", "responses", "gemini"]


@pytest.mark.parametrize("surface", SURFACES)
def test_each_ending_gets_its_verdict(surface: Surface) -> None:
    assert _judge(surface, _frames(surface, TEXT, "ok")) is Verdict.OK
    assert _judge(surface, _frames(surface, HALF, "error")) is Verdict.IN_BAND
    assert _judge(surface, _frames(surface, HALF, "none")) is Verdict.UNTERMINATED
    # Cut by the transport after some content: not in-band, whatever came before.
    assert (
        _judge(surface, _frames(surface, HALF, "none"), broken="ClientPayloadError") is Verdict.UNTERMINATED
    )
    # A normal ending with the wrong text is no success; an error before any content is a plain failure.
    assert _judge(surface, _frames(surface, HALF, "ok")) is not Verdict.OK
    assert _judge(surface, _frames(surface, "", "error")) is Verdict.FAILED


@pytest.mark.parametrize("surface", SURFACES)
def test_a_frame_after_the_terminator_is_a_broken_stream(surface: Surface) -> None:
    frames = _frames(surface, HALF, "error")
    assert _judge(surface, [*frames, frames[0]]) is Verdict.UNTERMINATED


def test_a_wrong_non_stream_answer_fails() -> None:
    good = {"choices": [{"message": {"content": TEXT}, "finish_reason": "stop"}]}
    assert _judge_body("chat", orjson.dumps(good))[0] is Verdict.OK
    short = {"choices": [{"message": {"content": HALF}, "finish_reason": "stop"}]}
    assert _judge_body("chat", orjson.dumps(short))[0] is Verdict.FAILED
    assert _judge_body("gemini", b'{"error": {"code": 500}}')[0] is Verdict.FAILED


def test_an_in_band_end_is_a_failure_unless_the_fault_can_come_after_the_commit_point() -> None:
    results = [Result(Call("chat", True), Verdict.IN_BAND, 0.01, "x")]
    assert tally(profile("cut_mid_stream"), results, 1.0).client_failures == 0
    assert tally(profile("cut_mid_stream"), results, 1.0).in_band == 1
    assert tally(profile("stall"), results, 1.0).client_failures == 1
