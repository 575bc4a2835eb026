"""A leading ``<think>…</think>`` block in content becomes reasoning, split across chunks or not."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from freellm.engine.pump import StreamPump
from freellm.engine.tools.think import ThinkSplitter
from freellm.errors import UpstreamError


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


def split(text: str, seed: int | None) -> list[str]:
    if seed is None:
        return list(text)
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 9)
        out.append(text[i : i + n])
        i += n
    return out


def run(pieces: list[str], **pump_kw: Any) -> tuple[StreamPump, list[dict[str, Any]]]:
    pump = StreamPump("m", **pump_kw)
    out: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        out += pump.feed(copy.deepcopy(chunk(piece, **({"role": "assistant"} if i == 0 else {}))))
    out += pump.feed(chunk(None, "stop"))
    out += pump.finish(saw_done=True)
    return pump, out


def text_of(out: list[dict[str, Any]], key: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(key) or "" for c in out if c.get("choices"))


# ---- the splitter ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4, 5])
@pytest.mark.parametrize(
    ("text", "reasoning", "answer"),
    [
        ("<think>plan the answer</think>The answer.", "plan the answer", "The answer."),
        ("\n<think>\nstep 1\nstep 2\n</think>\n\nDone.", "\nstep 1\nstep 2\n", "Done."),
        ("<think></think>Hi", "", "Hi"),
        ("<think>a < b and </thin is not the end</think>ok", "a < b and </thin is not the end", "ok"),
        ("No think here. <think>x</think>", "", "No think here. <think>x</think>"),
        ("<thinking>is not the tag", "", "<thinking>is not the tag"),
        ("<b>bold</b>", "", "<b>bold</b>"),
    ],
)
def test_splitter(seed: int | None, text: str, reasoning: str, answer: str) -> None:
    splitter = ThinkSplitter()
    thought, content = [], []
    for piece in split(text, seed):
        r, c = splitter.feed(piece)
        thought.append(r)
        content.append(c)
    r, c = splitter.finish()
    thought.append(r)
    content.append(c)
    assert "".join(thought) == reasoning
    assert "".join(content) == answer


def test_an_ordinary_answer_is_released_with_its_first_character() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("H") == ("", "H")
    assert splitter.done


def test_blank_and_tag_prefixes_are_held_until_decided() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("  ") == ("", "")
    assert splitter.feed("<th") == ("", "")
    assert splitter.feed("x") == ("", "  <thx")
    assert splitter.done


def test_reasoning_streams_out_except_a_possible_closing_tag() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<think>abc</") == ("abc", "")
    assert splitter.feed("thi") == ("", "")
    assert splitter.feed("nk>  ") == ("", "")
    assert not splitter.done  # waiting for the answer's first non-blank character
    assert splitter.feed(" Answer") == ("", "Answer")
    assert splitter.done


# ---- through the pump --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [None, 7, 8, 9])
def test_pump_moves_the_think_block_to_reasoning_and_commits_on_the_answer(seed: int | None) -> None:
    pump, out = run(split("<think>Let me think.</think>\n\nParis is the capital.", seed))
    assert text_of(out) == "Paris is the capital."
    assert text_of(out, "reasoning_content") == "Let me think."
    assert "<think>" not in text_of(out) and "</think>" not in text_of(out)
    result = pump.result()
    assert result.text == "Paris is the capital." and result.reasoning == "Let me think."
    assert out[0]["choices"][0]["delta"].get("role") == "assistant"  # the role still comes first


def test_reasoning_is_held_in_the_preamble_until_the_answer_commits() -> None:
    pump = StreamPump("m")
    assert pump.feed(chunk("<think>a long thought", role="assistant")) == []
    assert pump.feed(chunk(" continues")) == []
    assert not pump.committed and pump.first_token
    out = pump.feed(chunk("</think>Answer"))
    assert pump.committed
    assert [c["choices"][0]["delta"] for c in out] == [
        {"role": "assistant", "reasoning_content": "a long thought"},
        {"reasoning_content": " continues"},
        {"content": "Answer"},
    ]


def test_unclosed_think_is_reasoning_only_and_the_turn_is_empty() -> None:
    pump = StreamPump("m")
    pump.feed(chunk("<think>thinking forever"))
    with pytest.raises(UpstreamError, match="empty completion"):
        pump.finish(saw_done=True)
    assert not pump.committed


def test_a_bare_tag_prefix_at_the_end_is_text() -> None:
    _, out = run(["<th"])
    assert text_of(out) == "<th"


def test_think_tags_can_be_turned_off() -> None:
    _, out = run(["<think>x</think>y"], think_tags=False)
    assert text_of(out) == "<think>x</think>y"


def test_think_then_a_dialect_tool_call_is_rescued() -> None:
    from freellm.engine.pump import Rescue, ToolCall

    def rescue(text: str) -> Rescue:
        assert text.startswith("<tool_call>")
        return Rescue(calls=[ToolCall("call_x", "f", "{}")], clean_text="")

    _, out = run(split("<think>call f</think><tool_call>{}</tool_call>", 3), wants_tools=True, rescue=rescue)
    assert text_of(out) == "" and text_of(out, "reasoning_content") == "call f"
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_stream_reply_with_think_tags() -> None:
    pump = StreamPump("m", hold_all=True)
    pump.feed(chunk("<think>why</think>Because.", role="assistant"))
    pump.finish(saw_done=True)
    assert pump.result().text == "Because." and pump.result().reasoning == "why"
