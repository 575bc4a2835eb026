"""The conversation stages as pure functions: session keys (from every surface's canonical form), context
handoff, reasoning memory, profile prompts and model lists, and the token budget."""

from __future__ import annotations

from typing import Any

import pytest

from freellm.config import LimitsConfig, ProfileConfig, SessionsConfig
from freellm.core.request import ChatRequest, parse_chat_request
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft
from freellm.engine.pipeline.budget import BudgetStage
from freellm.engine.pipeline.profile import ProfileStage, apply_system_prompt, model_allowed
from freellm.errors import ClientError
from freellm.routing.sessions import (
    HANDOFF_MARKER,
    handoff_message,
    has_assistant_turn,
    next_memory,
    session_key,
    valid_session_header,
    with_handoff,
    with_reasoning,
)
from freellm.surfaces.anthropic.mapping import to_chat_request as anthropic_to_chat
from freellm.surfaces.anthropic.wire import parse_messages_request
from freellm.surfaces.gemini_wire.mapping import to_chat_request as gemini_to_chat
from freellm.surfaces.gemini_wire.wire import parse_generate_request
from freellm.surfaces.openai_completions import parse_completion_request
from freellm.surfaces.openai_completions import to_chat_request as completions_to_chat
from freellm.surfaces.responses.request import build_chat_request, parse_responses_request


def chat(*messages: dict[str, Any], **fields: Any) -> ChatRequest:
    return parse_chat_request({"messages": list(messages), **fields})


def key_of(req: ChatRequest, *, scope: str = "client-1", header: str | None = None) -> str | None:
    return session_key(scope=scope, model=req.requested_model, header=header, messages=req.messages)


# ---- session keys ---------------------------------------------------------------------------------------


def test_every_surface_keys_a_conversation_by_its_first_user_text() -> None:
    opening = "Refactor the parser."
    from_chat = chat({"role": "system", "content": "sys"}, {"role": "user", "content": opening})
    from_anthropic = anthropic_to_chat(
        parse_messages_request({"model": "claude", "max_tokens": 5, "system": "sys", "messages": [{"role": "user", "content": opening}]}),
        "auto",
    )
    from_gemini = gemini_to_chat(parse_generate_request({"contents": [{"role": "user", "parts": [{"text": opening}]}]}), "auto", stream=False)
    history = [{"role": "user", "content": opening}, {"role": "assistant", "content": "ok"}]
    from_responses = build_chat_request(parse_responses_request({"model": "auto", "input": "next"}), history)
    keys = {key_of(r) for r in (from_chat, from_anthropic, from_gemini, from_responses)}
    assert len(keys) == 1 and None not in keys
    # The legacy completion prompt is wrapped in the autocomplete framing: its own (stable) key.
    completion = completions_to_chat(parse_completion_request({"prompt": opening}), default_max_tokens=16)
    assert key_of(completion) == key_of(completions_to_chat(parse_completion_request({"prompt": opening}), default_max_tokens=16))


def test_keys_are_scoped_by_client_and_model() -> None:
    r = chat({"role": "user", "content": "hi"})
    assert key_of(r, scope="a") != key_of(r, scope="b")
    assert key_of(r) != key_of(chat({"role": "user", "content": "hi"}, model="x/y"))
    assert key_of(r) != key_of(chat({"role": "user", "content": "hello"}))


def test_header_keys_the_session_whatever_the_text() -> None:
    one = chat({"role": "user", "content": "one"})
    two = chat({"role": "user", "content": "two"})
    assert key_of(one, header="s-1") == key_of(two, header="s-1") != key_of(one)


@pytest.mark.parametrize("bad", ["", "   ", "x" * 257, "bell\x07", "new\nline", "esc\x1b[31m", "del\x7f"])
def test_unusable_headers_are_ignored(bad: str) -> None:
    assert valid_session_header(bad) is None
    r = chat({"role": "user", "content": "hi"})
    assert key_of(r, header=bad) == key_of(r)


def test_no_user_text_no_session() -> None:
    assert key_of(chat({"role": "system", "content": "only system"})) is None
    assert not has_assistant_turn(chat({"role": "user", "content": "hi"}).messages)


# ---- handoff --------------------------------------------------------------------------------------------


TURNS = [{"role": "user", "content": "The word is kumquat."}, {"role": "assistant", "content": "Noted."}]


def test_handoff_message_names_both_routes_and_carries_the_turns() -> None:
    text = handoff_message("a/m", "b/m", TURNS, 6000)
    assert text.startswith(f"{HANDOFF_MARKER} a/m → b/m\n")
    assert "User: The word is kumquat.\nAssistant: Noted." in text
    assert "do not restart" in text
    long = handoff_message("a/m", "b/m", [{"role": "user", "content": "x" * 100}], 50)
    assert long.endswith("\n…[truncated]") and "x" * 51 not in long


def test_handoff_goes_after_the_leading_system_messages_once() -> None:
    msgs = [{"role": "system", "content": "one"}, {"role": "system", "content": "two"}, {"role": "user", "content": "u"}]
    out = with_handoff(msgs, f"{HANDOFF_MARKER} x")
    assert out is not None and [m["content"] for m in out] == ["one", "two", f"{HANDOFF_MARKER} x", "u"]
    assert with_handoff(out, f"{HANDOFF_MARKER} y") is None
    assert msgs[2] == {"role": "user", "content": "u"} and len(msgs) == 3  # input untouched


# ---- reasoning memory -------------------------------------------------------------------------------------


MEMORY = {"route": "a/m", "text": "thinking", "signature": "sig", "answer": "42", "tool_call_ids": []}


def test_reasoning_restored_on_the_matching_newest_assistant_turn() -> None:
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "42"}, {"role": "user", "content": "n"}]
    out = with_reasoning(msgs, MEMORY)
    assert out is not None and out[1] == {"role": "assistant", "content": "42", "reasoning_content": "thinking", "reasoning_signature": "sig"}
    assert "reasoning_content" not in msgs[1]


@pytest.mark.parametrize(
    "assistant",
    [
        {"role": "assistant", "content": "other"},
        {"role": "assistant", "content": "42", "reasoning_content": "mine"},
        {"role": "assistant", "content": "42", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ],
)
def test_reasoning_not_restored_when_it_does_not_belong(assistant: dict[str, Any]) -> None:
    assert with_reasoning([{"role": "user", "content": "q"}, assistant], MEMORY) is None


def test_tool_turns_match_by_call_ids() -> None:
    memory = {**MEMORY, "answer": "", "tool_call_ids": ["c1"]}
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    out = with_reasoning(msgs, memory)
    assert out is not None and out[1]["reasoning_content"] == "thinking"


def test_next_memory_keeps_the_last_turns_clipped() -> None:
    cfg = SessionsConfig(context_handoff="on_model_switch", handoff_messages=3, handoff_message_chars=5)
    req = chat({"role": "system", "content": "s"}, {"role": "user", "content": "first question"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"})
    doc = next_memory(route="a/m", messages=req.messages, answer="the answer", tool_call_ids=[], reasoning="r", signature="", cfg=cfg)
    assert doc["route"] == "a/m"
    assert doc["turns"] == [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}, {"role": "assistant", "content": "the a…"}]
    assert doc["reasoning"]["text"] == "r" and doc["reasoning"]["answer"] == "the answer"
    no_memory = next_memory(route="a/m", messages=req.messages, answer="x", tool_call_ids=[], reasoning="r", signature="", cfg=SessionsConfig(reasoning_memory=False))
    assert no_memory["reasoning"] is None
    assert no_memory["turns"] == []  # without handoff nothing reads the turns


# ---- profiles ---------------------------------------------------------------------------------------------


def test_system_prompt_prepend_and_replace() -> None:
    msgs = [{"role": "system", "content": "client"}, {"role": "user", "content": "u"}, {"role": "system", "content": "late"}]
    assert apply_system_prompt(msgs, "P", "prepend")[0] == {"role": "system", "content": "P\n\nclient"}
    assert apply_system_prompt([{"role": "user", "content": "u"}], "P", "prepend")[0] == {"role": "system", "content": "P"}
    parts = [{"role": "system", "content": [{"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}}]}]
    assert apply_system_prompt(parts, "P", "prepend")[0]["content"][0] == {"type": "text", "text": "P"}
    assert apply_system_prompt(msgs, "P", "replace") == [{"role": "system", "content": "P"}, {"role": "user", "content": "u"}]


@pytest.mark.parametrize(
    ("models", "asked", "ok"),
    [
        (None, "anything/at-all", True),
        (["a/m"], "auto", True),
        (["a/m"], "a/m", True),
        (["a/m"], "A:m", True),
        (["a/m"], "b/m", False),
        (["a/m"], "m", False),
        (["m"], "m", True),
        (["m"], "b/m", True),
        (["m"], "b/other", False),
    ],
)
def test_model_lists(models: list[str] | None, asked: str, ok: bool) -> None:
    assert model_allowed(ProfileConfig(models=models), asked) is ok


def ctx(bound: str | None = None) -> RequestContext:
    return RequestContext(request_id="r", surface="chat", started=0.0, started_wall=0.0, bound_profile=bound)


async def test_profile_stage_picks_and_refuses() -> None:
    stage = ProfileStage({"team": ProfileConfig(system_prompt="P"), "other": ProfileConfig()})
    c = ctx("team")
    out = await stage(c, Draft(chat({"role": "user", "content": "u"})))
    assert c.profile == "team" and out.req.messages[0].content == "P"
    with pytest.raises(ClientError) as info:
        await stage(ctx("team"), Draft(chat({"role": "user", "content": "u"}, model="auto:other")))
    assert info.value.status == 403 and info.value.code == "model_not_allowed"
    unbound = ctx()
    await stage(unbound, Draft(chat({"role": "user", "content": "u"}, model="auto:other")))
    assert unbound.profile == "other"
    plain = Draft(chat({"role": "user", "content": "u"}))
    assert await stage(ctx(), plain) is plain


# ---- budget -------------------------------------------------------------------------------------------------


async def test_budget_stage() -> None:
    stage = BudgetStage(LimitsConfig(request_max_tokens_budget=100), image_tokens=1000)
    small = chat({"role": "user", "content": "x" * 40})  # 10 tokens
    assert (await stage(ctx(), Draft(small))).req.max_tokens == 90
    asked = chat({"role": "user", "content": "x" * 40}, max_tokens=50)
    assert (await stage(ctx(), Draft(asked))).req is asked
    with pytest.raises(ClientError) as info:
        await stage(ctx(), Draft(chat({"role": "user", "content": "x" * 40}, max_tokens=91)))
    assert info.value.status == 413 and info.value.code == "request_token_budget"
    with pytest.raises(ClientError):
        await stage(ctx(), Draft(chat({"role": "user", "content": "x" * 400})))
    with pytest.raises(ClientError):  # an image counts 1000 tokens
        await stage(ctx(), Draft(chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/i.png"}}]})))
    defaulted = ctx()
    defaulted.output_limit_asked = False  # a surface's own default (e.g. Gemini's 8192) is capped
    assert (await stage(defaulted, Draft(chat({"role": "user", "content": "x" * 40}, max_tokens=8192)))).req.max_tokens == 90
