"""Over the wire: the chat surface's streaming contract.

What a streaming client must be able to rely on, checked end to end through a real gateway and the
simulator: the commit point (headers only with the first real content), honest in-band errors after it,
tool calls emitted once and complete, usage once and last, a finish reason always, clean frames whatever
the upstream sent, and a prompt hang-up on the upstream when the client goes away.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2 as httpx
import openai
import pytest

from freellm.sim.control import SimControl
from tests.integration.helpers import (
    AUTH,
    MODEL,
    MakeGateway,
    body,
    one_route,
    sdk,
    stream_raw,
    two_routes,
    upstream,
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def finish_reasons(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices") and c["choices"][0]["finish_reason"]]


# -- a healthy stream ---------------------------------------------------------------------------------


def test_healthy_stream_frames_headers_and_single_finish(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "The quick brown fox.", "chunks": 4})

    out = stream_raw(gw, body())

    assert out.status == 200
    assert out.headers["content-type"].startswith("text/event-stream")
    assert out.headers["cache-control"] == "no-cache"
    assert out.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert "x-fallback-attempts" not in out.headers and "x-fallback-trail" not in out.headers
    assert out.other_lines == []  # no comments or keep-alives of our own
    assert out.text == "The quick brown fox."
    assert out.chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert {c["object"] for c in out.chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in out.chunks} == {MODEL}
    assert len({c["id"] for c in out.chunks}) == 1
    assert finish_reasons(out.chunks) == ["stop"]
    assert out.data[-1] == "[DONE]" and out.done_count == 1
    assert out.errors == []


# -- 4. failures after the commit point are reported, never retried ------------------------------------


def test_cut_after_content_keeps_text_then_one_stream_error_and_done(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "aaaabbbbccccdddd", "chunks": 4, "cut_after": 2})

    out = stream_raw(gw, body())

    assert out.status == 200
    assert out.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert out.text == "aaaabbbb"
    assert finish_reasons(out.chunks) == []
    assert len(out.errors) == 1
    assert out.errors[0]["type"] == "stream_error"
    assert "stream interrupted" in out.errors[0]["message"]
    assert f"{a}-key-1" not in out.errors[0]["message"]
    # The error frame comes after every content chunk, followed only by [DONE].
    assert out.data[-1] == "[DONE]" and out.done_count == 1
    assert "error" in json.loads(out.data[-2])
    assert [r["outcome"] for r in upstream(sim_control, a)] == ["cut"]
    assert upstream(sim_control, b) == []  # never switch models mid-stream


def test_cut_after_content_raises_in_the_sdk_after_the_partial_text(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "aaaabbbbccccdddd", "chunks": 4, "cut_after": 2})

    received: list[str] = []
    stream = sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}], stream=True)
    with pytest.raises(openai.APIError, match="stream interrupted"):
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")

    assert "".join(received) == "aaaabbbb"
    assert upstream(sim_control, b) == []


def test_inband_error_after_content_is_one_stream_error_frame(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "aaaabbbb", "chunks": 2, "inband_error": "overloaded", "inband_error_after": 1})

    out = stream_raw(gw, body())

    assert out.text == "aaaa"
    assert [e["type"] for e in out.errors] == ["stream_error"]
    assert out.data[-1] == "[DONE]" and out.done_count == 1
    assert upstream(sim_control, b) == []


def test_stream_ending_without_done_or_finish_after_content_is_a_stream_error(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "half a sentence", "chunks": 3, "done": False, "finish_reason": None})

    out = stream_raw(gw, body())

    assert out.text == "half a sentence"
    assert finish_reasons(out.chunks) == []
    assert [e["type"] for e in out.errors] == ["stream_error"]
    assert out.data[-1] == "[DONE]" and out.done_count == 1
    assert upstream(sim_control, b) == []


# -- 5. tool calls ----------------------------------------------------------------------------------------


def test_fragmented_tool_call_reaches_sdk_stream_helper_complete(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}], "tool_fragments": 5}
    )

    with sdk(gw).chat.completions.stream(
        model="auto",
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    ) as stream:
        done_events = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        completion = stream.get_final_completion()

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.id
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}
    assert len(done_events) == 1
    assert not choice.message.content
    [seen] = upstream(sim_control, a)
    assert seen["body"]["tools"][0]["function"]["name"] == "get_weather"


def test_fragmented_tool_call_is_one_raw_chunk_with_id_then_finish_then_usage(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a,
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_upstream_1"},
                {"name": "get_weather", "arguments": {"city": "Oslo"}},
            ],
            "tool_fragments": 4,
        },
    )

    out = stream_raw(gw, body("Weather?", tools=[WEATHER_TOOL]))

    with_calls = [i for i, c in enumerate(out.chunks) if c.get("choices") and c["choices"][0]["delta"].get("tool_calls")]
    assert len(with_calls) == 1
    calls = out.chunks[with_calls[0]]["choices"][0]["delta"]["tool_calls"]
    assert [c["index"] for c in calls] == [0, 1]
    assert calls[0]["id"] == "call_upstream_1"
    assert all(c["id"] and c["type"] == "function" and c["function"]["name"] == "get_weather" for c in calls)
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert out.finish_positions == [with_calls[0] + 1]
    assert finish_reasons(out.chunks) == ["tool_calls"]
    assert out.usage_positions == [len(out.chunks) - 1]
    assert out.data[-1] == "[DONE]" and out.errors == []


def test_tool_call_finish_reason_is_tool_calls_whatever_upstream_said(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}], "finish_reason": "stop"})

    out = stream_raw(gw, body("Weather?", tools=[WEATHER_TOOL]))

    assert finish_reasons(out.chunks) == ["tool_calls"]


def test_text_then_tool_call_streams_the_text_and_one_tool_call_chunk(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Let me check that.", "tool_calls": [{"name": "get_weather", "arguments": "{}"}]})

    out = stream_raw(gw, body("Weather?", tools=[WEATHER_TOOL]))

    assert out.text == "Let me check that."
    with_calls = [c for c in out.chunks if c.get("choices") and c["choices"][0]["delta"].get("tool_calls")]
    assert len(with_calls) == 1
    assert finish_reasons(out.chunks) == ["tool_calls"]


def test_text_that_only_looks_like_markup_is_not_held_as_a_tool_call(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "<b>bold</b> and plain", "chunks": 5})

    out = stream_raw(gw, body("Format this.", tools=[WEATHER_TOOL]))

    assert out.text == "<b>bold</b> and plain"
    assert finish_reasons(out.chunks) == ["stop"]


def test_tool_call_with_truncated_json_arguments_is_dropped_and_the_empty_turn_fails_over(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Par'}]})
    sim_control.script(b, {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]})

    out = stream_raw(gw, body("Weather?", tools=[WEATHER_TOOL]))

    [chunk] = [c for c in out.chunks if c.get("choices") and c["choices"][0]["delta"].get("tool_calls")]
    [call] = chunk["choices"][0]["delta"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert out.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert out.headers["x-fallback-trail"] == f"{a}/{MODEL} key1=empty_completion"


def test_only_the_tool_calls_with_valid_json_arguments_reach_the_client(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a,
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": '{"city": '},
                {"name": "get_weather", "arguments": '{"city": "Oslo"}', "id": "call_ok"},
            ]
        },
    )

    completion = sdk(gw).chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "Weather?"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )

    calls = completion.choices[0].message.tool_calls
    assert calls is not None
    assert [(c.id, json.loads(c.function.arguments)) for c in calls] == [("call_ok", {"city": "Oslo"})]  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"


# -- 6. usage ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage_mode", "finish"),
    [("last", "stop"), ("last", None), ("separate", "stop")],
    ids=["on-finish-frame", "on-last-content-frame", "separate-frame"],
)
def test_usage_is_sent_exactly_once_after_the_finish_chunk(
    make_gateway: MakeGateway, sim_control: SimControl, usage_mode: str, finish: str | None
) -> None:
    gw, a = one_route(make_gateway)
    # With no finish frame upstream, `last` puts the usage on the last content frame.
    sim_control.script(a, {"text": "Counting tokens here.", "chunks": 3, "usage": usage_mode, "finish_reason": finish})

    out = stream_raw(gw, body())

    assert out.text == "Counting tokens here."
    assert len(out.finish_positions) == 1
    assert len(out.usage_positions) == 1
    [finish_at], [usage_at] = out.finish_positions, out.usage_positions
    assert usage_at > finish_at and usage_at == len(out.chunks) - 1
    usage_chunk = out.chunks[usage_at]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == len("Counting tokens here.") // 4
    assert usage_chunk["usage"]["total_tokens"] == (
        usage_chunk["usage"]["prompt_tokens"] + usage_chunk["usage"]["completion_tokens"]
    )


def test_usage_reaches_the_sdk_once_with_include_usage(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Four words right here.", "usage": "last"})

    chunks = list(
        sdk(gw).chat.completions.create(
            model="auto",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    with_usage = [c for c in chunks if c.usage is not None]
    assert len(with_usage) == 1 and with_usage[0] is chunks[-1]
    assert with_usage[0].usage.completion_tokens == len("Four words right here.") // 4  # type: ignore[union-attr]
    [seen] = upstream(sim_control, a)
    assert seen["body"]["stream_options"] == {"include_usage": True}


# -- 7. finish reason -------------------------------------------------------------------------------------


def test_missing_upstream_finish_reason_becomes_stop(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "No finish reason upstream.", "finish_reason": None})

    out = stream_raw(gw, body())
    assert out.text == "No finish reason upstream."
    assert finish_reasons(out.chunks) == ["stop"]
    assert out.data[-1] == "[DONE]" and out.errors == []

    sim_control.script(a, {"text": "Again, via the SDK.", "finish_reason": None})
    chunks = list(sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}], stream=True))
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def test_upstream_length_finish_reason_is_passed_through(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Truncated answ", "finish_reason": "length"})

    out = stream_raw(gw, body())

    assert out.text == "Truncated answ"
    assert finish_reasons(out.chunks) == ["length"]


# -- 11. noisy upstream framing ------------------------------------------------------------------------------


def test_malformed_frames_and_keepalive_comments_do_not_corrupt_text(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    text = "Every word survives the noise around it."
    sim_control.script(a, {"text": text, "chunks": 6, "malformed": True, "keepalive_comments": 3})

    out = stream_raw(gw, body())

    assert out.status == 200
    assert out.text == text
    assert out.other_lines == []  # neither the comments nor the garbage are forwarded
    assert finish_reasons(out.chunks) == ["stop"]
    assert len(out.usage_positions) == 1
    assert out.errors == [] and out.data[-1] == "[DONE]"

    sim_control.script(a, {"text": text, "chunks": 6, "malformed": True, "keepalive_comments": 3})
    chunks = list(sdk(gw).chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text


# -- 12. the commit point ----------------------------------------------------------------------------------------


def test_stream_headers_are_held_until_commit_and_name_the_route_that_answered(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    # alpha answers at once with headers and reasoning, goes quiet for 0.3 s, then fails in-band.
    sim_control.script(a, {"reasoning": "alpha is thinking", "chunk_delay_ms": 300, "inband_error": "overloaded"})
    sim_control.script(b, {"text": "Beta answered."})

    out = stream_raw(gw, body())

    assert out.elapsed_to_headers >= 0.25  # no headers went out while alpha was still alive
    assert out.headers["x-routed-via"] == f"{b}/{MODEL}"
    assert out.headers["x-fallback-attempts"] == "1"
    assert out.headers["x-fallback-trail"].startswith(f"{a}/{MODEL} key1=")
    assert out.text == "Beta answered."
    assert "alpha is thinking" not in "".join(out.data)
    assert out.errors == []


# -- 13. the client goes away ------------------------------------------------------------------------------------


def test_client_disconnect_mid_stream_hangs_up_upstream_and_books_nothing(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"chunk_delay_ms": 200, "chunks": 20, "text": "x" * 200})

    first_content = None
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", f"{gw.v1}/chat/completions", json=body(), headers=AUTH) as resp,
    ):
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                frame = json.loads(line[len("data: ") :])
                if frame["choices"] and frame["choices"][0]["delta"].get("content"):
                    first_content = frame
                    break
    assert first_content is not None
    closed_at = time.monotonic()

    [seen] = upstream(sim_control, a)
    entry = sim_control.wait_ended(seen["id"], timeout=2)
    assert entry["outcome"] == "client_disconnected"
    assert entry["ended_at"] - entry["started_at"] < 3  # not the whole 20 x 200 ms
    assert time.monotonic() - closed_at < 2
    assert gw.run(gw.state.store.lease_count()) == 0
    assert gw.run(gw.state.store.active_cooldowns(time.time())) == {}
    assert upstream(sim_control, b) == []  # a client that left is not a reason to fail over
    rows = gw.run(gw.state.store.recent_requests(10))
    assert [r.outcome for r in rows] == ["canceled"]


def test_client_disconnect_during_a_fast_stream_is_logged_as_canceled(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    # A big answer with no delays: the gateway is busy writing when the client leaves, so it may learn of
    # the disconnect from a failed write rather than from the handler's cancellation. Both must end the
    # same way: upstream hung up, lease released, nothing booked, a `canceled` row.
    gw, a = one_route(make_gateway)
    # 1 ms between 2 KB chunks: the stream lasts ~2 s, so the upstream cannot have pushed everything into
    # the socket buffers (and ended "completed") before the client's disconnect reaches it.
    sim_control.script(a, {"chunks": 2000, "text": "y" * 4_000_000, "chunk_delay_ms": 1})

    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", f"{gw.v1}/chat/completions", json=body(), headers=AUTH) as resp,
    ):
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                break

    [seen] = upstream(sim_control, a)
    assert sim_control.wait_ended(seen["id"], timeout=3)["outcome"] == "client_disconnected"
    assert gw.run(gw.state.store.lease_count()) == 0
    assert gw.run(gw.state.store.active_cooldowns(time.time())) == {}
    rows = gw.run(gw.state.store.recent_requests(10))
    assert [(r.outcome, r.status) for r in rows] == [("canceled", 499)]


def test_client_disconnect_before_commit_hangs_up_upstream_without_failing_over(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"stall_after": 0})  # headers upstream, then silence: the gateway holds its own

    with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=httpx.Timeout(10, read=0.3)) as client:
        client.post(f"{gw.v1}/chat/completions", json=body(), headers=AUTH)

    [seen] = upstream(sim_control, a)
    assert sim_control.wait_ended(seen["id"], timeout=2)["outcome"] == "client_disconnected"
    assert upstream(sim_control, b) == []
    assert gw.run(gw.state.store.lease_count()) == 0
    assert gw.run(gw.state.store.active_cooldowns(time.time())) == {}
    rows = gw.run(gw.state.store.recent_requests(10))
    assert [(r.outcome, r.status) for r in rows] == [("canceled", 499)]


# -- stalls after the commit point -------------------------------------------------------------------------------


def test_stall_after_content_is_a_stream_error_after_the_stall_timeout(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra={"stream": {"stall_timeout_s": 0.5}})
    sim_control.script(a, {"text": "aaaabbbbccccdddd", "chunks": 4, "stall_after": 2})

    started = time.monotonic()
    out = stream_raw(gw, body())
    elapsed = time.monotonic() - started

    assert 0.4 <= elapsed < 5
    assert out.text == "aaaabbbb"
    assert [e["type"] for e in out.errors] == ["stream_error"]
    assert out.data[-1] == "[DONE]" and out.done_count == 1
    [seen] = upstream(sim_control, a)
    assert sim_control.wait_ended(seen["id"], timeout=2)["outcome"] == "client_disconnected"
    assert upstream(sim_control, b) == []
    assert gw.run(gw.state.store.lease_count()) == 0


# -- usage the upstream never sent -------------------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", [False, True])
def test_usage_missing_upstream_is_estimated_only_when_the_client_asked(
    make_gateway: MakeGateway, sim_control: SimControl, include_usage: bool
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "No usage from upstream at all.", "usage": "none"})
    extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if include_usage else {}

    out = stream_raw(gw, body(**extra))

    assert out.text == "No usage from upstream at all."
    if not include_usage:
        assert out.usage_positions == []
        return
    assert out.usage_positions == [len(out.chunks) - 1]
    assert out.usage_positions[0] > out.finish_positions[0]
    assert out.chunks[-1]["usage"]["completion_tokens"] > 0
