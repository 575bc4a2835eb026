"""Over the wire: ``stream.continue_on_failure`` — a committed stream whose upstream is cut is finished
by the next route, spliced into the same client stream, on chat, Messages and Responses with the
official SDKs (docs/continuation.md). With the setting off, nothing changes (the in-band error)."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from freellm.core.tokens import estimate_text_tokens
from freellm.engine.continuation import CONTINUE_INSTRUCTION
from freellm.sim.control import SimControl
from freellm.sim.plan import split_even
from tests.integration.helpers import (
    AUTH,
    MODEL,
    MakeGateway,
    anthropic_sdk,
    body,
    received,
    sdk,
    stream_raw,
    two_routes,
)

ON = {"stream": {"continue_on_failure": True}}
TEXT_A = "The quick brown fox jumps over the lazy dog."
TEXT_B = " And then it ran far away."
PREFIX = "".join(split_even(TEXT_A, 5)[:3])
"""What the client has of A's answer when A is cut after 3 of its 5 chunks."""


def cut_a_then_b(sim_control: SimControl, a: str, b: str, text_b: str = TEXT_B) -> None:
    sim_control.script(a, {"text": TEXT_A, "chunks": 5, "cut_after": 3})
    sim_control.script(b, {"text": text_b, "chunks": 3})


def assert_continuation_request(sim_control: SimControl, b: str) -> None:
    """B was asked to continue: the partial answer as an assistant prefill, then the instruction."""
    [sent] = received(sim_control, b)
    assert sent["messages"][-2] == {"role": "assistant", "content": PREFIX}
    assert sent["messages"][-1] == {"role": "user", "content": CONTINUE_INSTRUCTION}


def test_chat_stream_cut_after_3_of_5_chunks_is_completed_by_the_next_route(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra=ON)
    cut_a_then_b(sim_control, a, b)
    stream = sdk(gw).chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "tell me"}], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == PREFIX + TEXT_B
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1
    [finish] = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish.choices[0].finish_reason == "stop"
    assert (finish.model_extra or {})["x_freellm"] == {"continued_from": f"{a}/{MODEL}", "continued_on": f"{b}/{MODEL}"}
    usage = chunks[-1].usage
    assert usage is not None  # summed: A's part (estimated, it never said) and B's reported figures
    assert usage.completion_tokens == estimate_text_tokens(len(PREFIX)) + max(1, len(TEXT_B) // 4)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert_continuation_request(sim_control, b)


def test_a_continuation_that_repeats_the_prefill_is_trimmed(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway, extra=ON)
    cut_a_then_b(sim_control, a, b, text_b=TEXT_A)  # B starts the whole answer over
    raw = stream_raw(gw, body("tell me"))
    text = "".join(f["choices"][0]["delta"].get("content") or "" for f in raw.frames if f.get("choices"))
    assert text == TEXT_A
    assert raw.data[-1] == "[DONE]" and not any("error" in f for f in raw.frames)


def test_messages_stream_is_continued_and_says_so_in_message_delta(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra=ON)
    cut_a_then_b(sim_control, a, b)
    events = list(
        anthropic_sdk(gw).messages.create(
            model="auto", max_tokens=200, messages=[{"role": "user", "content": "tell me"}], stream=True
        )
    )
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == PREFIX + TEXT_B
    assert [e.type for e in events].count("message_start") == 1
    assert [e.type for e in events].count("content_block_start") == 1  # one text block, spliced
    [delta] = [e for e in events if e.type == "message_delta"]
    assert delta.delta.stop_reason == "end_turn"
    assert (delta.model_extra or {})["x_freellm"] == {"continued_from": f"{a}/{MODEL}", "continued_on": f"{b}/{MODEL}"}
    assert_continuation_request(sim_control, b)


def test_responses_stream_is_continued_and_the_stored_response_says_so(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra=ON)
    cut_a_then_b(sim_control, a, b)
    client = sdk(gw)
    events = list(client.responses.create(model="auto", input="tell me", stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == PREFIX + TEXT_B
    [completed] = [e for e in events if e.type == "response.completed"]
    marker = {"continued_from": f"{a}/{MODEL}", "continued_on": f"{b}/{MODEL}"}
    assert (completed.response.model_extra or {})["x_freellm"] == marker
    assert completed.response.output_text == PREFIX + TEXT_B
    stored = httpx.get(f"{gw.v1}/responses/{completed.response.id}", headers=AUTH).json()
    assert stored["x_freellm"] == marker and stored["status"] == "completed"
    assert_continuation_request(sim_control, b)


def test_the_request_log_names_both_routes(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    admin = "sk-admin-continuation"
    gw, a, b = two_routes(make_gateway, extra={**ON, "auth": {"admin_keys": [admin]}})
    cut_a_then_b(sim_control, a, b)
    stream_raw(gw, body("tell me"))
    rows = httpx.get(f"{gw.base_url}/admin/requests", headers={"Authorization": f"Bearer {admin}"}).json()["data"]
    [row] = rows
    assert row["route"] == f"{b}/{MODEL}" and row["status"] == 200
    assert row["continued_from"] == f"{a}/{MODEL}" and row["continued_on"] == f"{b}/{MODEL}"


@pytest.mark.parametrize(
    ("extra", "model"),
    [({}, "auto"), (ON, "pin")],
    ids=["setting-off", "pinned-model"],
)
def test_without_continuation_the_cut_is_an_in_band_error(
    make_gateway: MakeGateway, sim_control: SimControl, extra: dict[str, Any], model: str
) -> None:
    gw, a, b = two_routes(make_gateway, extra=extra)
    cut_a_then_b(sim_control, a, b)
    raw = stream_raw(gw, body("tell me", model=f"{a}/{MODEL}" if model == "pin" else "auto"))
    frames = raw.frames
    assert "".join(f["choices"][0]["delta"].get("content") or "" for f in frames if f.get("choices")) == PREFIX
    assert frames[-1]["error"]["type"] == "stream_error" and raw.data[-1] == "[DONE]"
    assert not any("x_freellm" in f for f in frames)
    assert received(sim_control, b) == []


def test_when_no_route_can_continue_the_stream_ends_in_band(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway, extra=ON)
    sim_control.script(a, {"text": TEXT_A, "chunks": 5, "cut_after": 3})
    sim_control.script(b, {"status": 500})  # B fails before sending anything: nothing left to try
    raw = stream_raw(gw, body("tell me"))
    frames = raw.frames
    assert "".join(f["choices"][0]["delta"].get("content") or "" for f in frames if f.get("choices")) == PREFIX
    assert frames[-1]["error"]["type"] == "stream_error" and raw.data[-1] == "[DONE]"
    assert len(received(sim_control, b)) == 1


def test_a_stalled_stream_is_continued_after_the_stall_timeout(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a, b = two_routes(make_gateway, extra={"stream": {"continue_on_failure": True, "stall_timeout_s": 0.3}})
    sim_control.script(a, {"text": TEXT_A, "chunks": 5, "stall_after": 3})
    sim_control.script(b, {"text": TEXT_B, "chunks": 2})
    raw = stream_raw(gw, body("tell me"))
    frames = raw.frames
    assert "".join(f["choices"][0]["delta"].get("content") or "" for f in frames if f.get("choices")) == PREFIX + TEXT_B
    [finish] = [f for f in frames if f.get("choices") and f["choices"][0].get("finish_reason")]
    assert finish["x_freellm"]["continued_from"] == f"{a}/{MODEL}"
    assert_continuation_request(sim_control, b)
