"""The fusion judge's prompt (freellm/fusion/judge.py): the conversation with its tool traffic and images
as text, the client's system text after the judge's instruction, the panel's drafts in a last user turn.

Golden files in ``tests/golden/fusion/judge_*.json`` hold ``messages`` (the conversation as wire dicts),
``answers`` (the panel's texts) and the reviewed ``expected`` judge messages. After an intended change run
``FREELLM_UPDATE_GOLDEN=1 pytest tests/unit/test_fusion_judge.py`` and review the diff.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from freellm.core.request import parse_chat_request
from freellm.fusion.judge import JUDGE_INSTRUCTION, judge_messages
from tests.unit.helpers import GOLDEN_ROOT, check_golden, golden_files

GOLDEN = GOLDEN_ROOT / "fusion"
FILES = golden_files(GOLDEN, "judge")

LEAD = "Here are the drafted answers to the conversation above."
ASK = "Write the one final answer to my last message now: a standalone reply, as if it were your own first answer."


def _listing(answers: list[str]) -> str:
    return "\n\n".join(f"--- Response {i} ---\n{a}" for i, a in enumerate(answers, 1))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_judge_messages_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    messages = copy.deepcopy(doc["messages"])
    actual = judge_messages(messages, doc["answers"])
    assert messages == doc["messages"], "the conversation is not changed"
    check_golden(path, doc, actual)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_judge_prompts_have_the_judge_shape(path: Path) -> None:
    """Whatever the conversation: one leading system message starting with the instruction, then only
    user/assistant turns with string content, the last one listing every draft."""
    doc = json.loads(path.read_text())
    out = doc["expected"]
    assert out[0]["role"] == "system"
    assert out[0]["content"].startswith(JUDGE_INSTRUCTION)
    assert all(m["role"] in ("user", "assistant") for m in out[1:])
    assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in out)
    assert out[-1] == {"role": "user", "content": f"{LEAD}\n\n{_listing(doc['answers'])}\n\n{ASK}"}
    assert len(out) == 2 + sum(m.get("role") not in ("system", "developer") for m in doc["messages"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_conversations_are_valid_chat_requests_and_judge_the_same_after_parsing(path: Path) -> None:
    """The golden inputs are what a chat request's messages look like on the wire: parsing them and
    judging their ``wire()`` form gives the same prompt (up to what normalisation fills in)."""
    doc = json.loads(path.read_text())
    req = parse_chat_request({"model": "fusion", "messages": doc["messages"]})
    wired = judge_messages([m.wire() for m in req.messages], doc["answers"])
    assert wired[0] == doc["expected"][0]
    assert wired[-1] == doc["expected"][-1]
    assert [m["role"] for m in wired] == [m["role"] for m in doc["expected"]]


def test_the_golden_set_covers_the_brief() -> None:
    names = {p.stem for p in FILES}
    assert {
        "judge_plain",
        "judge_client_system",
        "judge_tool_calls",
        "judge_images",
        "judge_several_answers",
    } <= names


# ---- one rule at a time --------------------------------------------------------------------------------


def test_a_plain_turn_keeps_its_text_and_role() -> None:
    out = judge_messages([{"role": "user", "content": "hello"}], ["hi there"])
    assert out == [
        {"role": "system", "content": JUDGE_INSTRUCTION},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": f"{LEAD}\n\n--- Response 1 ---\nhi there\n\n{ASK}"},
    ]


def test_leading_system_and_developer_texts_follow_the_instruction_in_order() -> None:
    out = judge_messages(
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "system", "content": [{"type": "text", "text": "Use British spelling."}]},
            {"role": "user", "content": "colour?"},
        ],
        ["colour"],
    )
    assert out[0] == {
        "role": "system",
        "content": f"{JUDGE_INSTRUCTION}\n\nBe brief.\n\nUse British spelling.",
    }
    assert [m["role"] for m in out] == ["system", "user", "user"]


def test_a_system_message_after_a_turn_is_a_later_instruction_in_the_system_text() -> None:
    out = judge_messages(
        [
            {"role": "user", "content": "a"},
            {"role": "system", "content": "Now in Spanish."},
            {"role": "user", "content": "b"},
        ],
        ["x"],
    )
    assert out[0]["content"] == f"{JUDGE_INSTRUCTION}\n\n(Later instruction) Now in Spanish."
    assert [m["content"] for m in out[1:3]] == ["a", "b"]


def test_empty_system_texts_are_left_out() -> None:
    out = judge_messages([{"role": "system", "content": ""}, {"role": "system", "content": []}], ["x"])
    assert out[0] == {"role": "system", "content": JUDGE_INSTRUCTION}


def test_assistant_tool_calls_become_text_after_the_content() -> None:
    message = {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}},
            {"id": "c2", "type": "function", "function": {"name": "now"}},
            {"type": "function", "function": {"arguments": "{}"}},
            "not a call",
            {"id": "c4", "type": "function"},
        ],
    }
    out = judge_messages([message], ["x"])
    assert out[1] == {
        "role": "assistant",
        "content": 'Checking.\n[called lookup (c1) with {"q":"x"}]\n[called now (c2) with {}]\n[called ? with {}]',
    }


def test_a_call_and_its_result_carry_the_same_id() -> None:
    calls = [
        {
            "id": f"call_{city}",
            "type": "function",
            "function": {"name": "weather", "arguments": f'{{"city":"{city}"}}'},
        }
        for city in ("Oslo", "Rome")
    ]
    out = judge_messages(
        [
            {"role": "user", "content": "Oslo and Rome?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_Rome", "content": "19"},
            {"role": "tool", "tool_call_id": "call_Oslo", "content": "4"},
        ],
        ["x"],
    )
    assert out[2]["content"] == (
        '[called weather (call_Oslo) with {"city":"Oslo"}]\n[called weather (call_Rome) with {"city":"Rome"}]'
    )
    assert [m["content"] for m in out[3:5]] == ["[result of call_Rome] 19", "[result of call_Oslo] 4"]


def test_an_assistant_turn_with_only_calls_has_no_leading_blank_line() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    assert judge_messages([message], ["x"])[1]["content"] == "[called f (c1) with {}]"


def test_a_tool_result_is_a_user_turn_naming_its_call() -> None:
    out = judge_messages(
        [
            {"role": "tool", "tool_call_id": "call_9", "content": "42"},
            {"role": "tool", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "tool", "tool_call_id": "", "content": None},
        ],
        ["x"],
    )
    assert [m["content"] for m in out[1:4]] == [
        "[result of call_9] 42",
        "[result of a tool call] a\nb",
        "[result of a tool call] ",
    ]
    assert all(m["role"] == "user" for m in out[1:4])


@pytest.mark.parametrize("kind", ["image_url", "image", "input_image"])
def test_each_image_part_becomes_a_marker(kind: str) -> None:
    message = {
        "role": "user",
        "content": [{"type": "text", "text": "look"}, {"type": kind}, {"type": "text", "text": "ok?"}],
    }
    assert judge_messages([message], ["x"])[1]["content"] == "look\n[image]\nok?"


def test_parts_the_judge_cannot_read_are_left_out() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "text", "text": 7},
            {"type": "text"},
            {"text": "no type"},
            {"type": "text", "text": "kept"},
        ],
    }
    assert judge_messages([message], ["x"])[1]["content"] == "kept"


def test_content_that_is_neither_text_nor_parts_is_empty() -> None:
    out = judge_messages(
        [{"role": "user", "content": None}, {"role": "user"}, {"role": "user", "content": 3}], ["x"]
    )
    assert [m["content"] for m in out[1:4]] == ["", "", ""]


def test_answers_are_numbered_in_panel_order() -> None:
    answers = ["first", "second\nline two", "", "fourth"]
    last = judge_messages([{"role": "user", "content": "q"}], answers)[-1]
    assert last["content"] == f"{LEAD}\n\n{_listing(answers)}\n\n{ASK}"
    positions = [last["content"].index(f"--- Response {i} ---") for i in range(1, 5)]
    assert positions == sorted(positions)
    assert "--- Response 5 ---" not in last["content"]


def test_the_answers_turn_comes_last_even_after_an_assistant_turn() -> None:
    out = judge_messages(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "prefill"}], ["a", "b"]
    )
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]


def test_no_conversation_still_gives_the_instruction_and_the_drafts() -> None:
    assert judge_messages([], ["a", "b"]) == [
        {"role": "system", "content": JUDGE_INSTRUCTION},
        {"role": "user", "content": f"{LEAD}\n\n{_listing(['a', 'b'])}\n\n{ASK}"},
    ]


def test_the_instruction_tells_the_judge_not_to_mention_the_drafts() -> None:
    assert "Never mention the drafts" in JUDGE_INSTRUCTION


def test_input_messages_are_not_mutated() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "s"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
    ]
    before = copy.deepcopy(messages)
    judge_messages(messages, ["a"])
    assert messages == before
