"""The Anthropic upstream provider: golden request/stream translation, error wording and classification,
and the provider's I/O behaviour against the simulator's Anthropic wire (timeouts, statuses, streams).

Golden files live in ``tests/golden/anthropic_upstream/``: ``request_*`` (a client chat request → the
Anthropic body), ``stream_*`` (Anthropic SSE events → canonical chunks), ``message_*`` (a non-stream
message → chunks). Each holds its input and the reviewed ``expected`` output (request translations are
compared byte for byte, key order included). After an intended change run
``FREELLM_UPDATE_GOLDEN=1 pytest tests/unit/test_anthropic_provider.py`` and review the diff.
``request_cache_control_*`` cover prompt-caching markers (kept on their blocks, at most 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from freellm.config import ProviderConfig
from freellm.core.request import parse_chat_request
from freellm.engine.failure import FailureKind, classify
from freellm.errors import UpstreamError
from freellm.providers.anthropic import AnthropicProvider
from freellm.providers.anthropic_wire import (
    AnthropicStreamTranslator,
    anthropic_error_message,
    inband_error,
    message_to_chunks,
    to_messages_request,
)
from freellm.providers.anthropic_wire.request import MAX_CACHE_BREAKPOINTS
from freellm.providers.base import Timeouts
from freellm.providers.registry import build_providers
from freellm.sim.anthropic_wire import ANTHROPIC_WIRE
from freellm.sim.plan import FrameKind, build_plan
from freellm.sim.scenario import parse_scenario
from freellm.sim.wire import WireRequestError
from tests.unit.helpers import GOLDEN_ROOT, check_golden, golden_files, pump_chunks

GOLDEN = GOLDEN_ROOT / "anthropic_upstream"
CREATED = 1_700_000_000


def _golden(prefix: str) -> list[Path]:
    return golden_files(GOLDEN, prefix)


# ---- golden: request translation ----------------------------------------------------------------------


@pytest.mark.parametrize("path", _golden("request"), ids=lambda p: p.stem)
def test_request_translation_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    req = parse_chat_request(doc["client_request"])
    actual = to_messages_request(req.upstream_body(doc["model"], stream=doc["stream"]))
    check_golden(path, doc, actual)
    assert orjson.dumps(actual) == orjson.dumps(doc["expected"]), "same keys, same order"


@pytest.mark.parametrize("path", _golden("request"), ids=lambda p: p.stem)
def test_every_golden_request_is_valid_anthropic(path: Path) -> None:
    """The simulator checks requests the way Anthropic does: every translation must pass."""
    doc = json.loads(path.read_text())
    body = to_messages_request(
        parse_chat_request(doc["client_request"]).upstream_body(doc["model"], stream=True)
    )
    view = ANTHROPIC_WIRE.parse_request(body, {})
    assert view.model == doc["model"] and view.stream is True


def test_request_translation_does_not_touch_the_canonical_body() -> None:
    req = parse_chat_request(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": "  ",
                    "tool_calls": [{"id": "a.b", "function": {"name": "f"}}],
                },
                {"role": "tool", "tool_call_id": "a.b", "content": "r"},
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
        }
    )
    body = req.upstream_body("m", stream=False)
    before = json.dumps(body, sort_keys=True)
    to_messages_request(body)
    to_messages_request(body)
    assert json.dumps(body, sort_keys=True) == before
    assert req.upstream_body("m", stream=False) == body


EPH = {"type": "ephemeral"}


def _marked_chat(markers: int) -> dict[str, Any]:
    """A chat request with ``markers`` marked user text parts, one per turn."""
    messages: list[dict[str, Any]] = []
    for i in range(markers):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"q{i}", "cache_control": EPH}]})
        messages.append({"role": "assistant", "content": f"a{i}"})
    return {"messages": [*messages, {"role": "user", "content": "last"}]}


def _markers(anthropic_body: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for m in anthropic_body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if "cache_control" in b
    ]


@pytest.mark.parametrize("markers", [0, 1, 4, 5, 9])
def test_at_most_four_breakpoints_the_last_ones_kept(markers: int) -> None:
    body = parse_chat_request(_marked_chat(markers)).upstream_body("m", stream=False)
    before = orjson.dumps(body)
    out = to_messages_request(body)
    kept = max(0, markers - MAX_CACHE_BREAKPOINTS)
    assert _markers(out) == [f"q{i}" for i in range(kept, markers)]
    assert orjson.dumps(body) == before  # the canonical body (shared between attempts) is untouched
    ANTHROPIC_WIRE.parse_request(out, {})


def test_default_max_tokens_is_a_provider_setting() -> None:
    body = parse_chat_request({"messages": [{"role": "user", "content": "x"}]}).upstream_body(
        "m", stream=False
    )
    assert to_messages_request(body, default_max_tokens=1234)["max_tokens"] == 1234
    provider = AnthropicProvider(_config("https://api.anthropic.com/v1"), None, default_max_tokens=77)  # type: ignore[arg-type]
    assert provider.build_body(body, stream=True)["max_tokens"] == 77
    assert provider.build_body(body, stream=True)["stream"] is True
    assert "stream" not in provider.build_body({**body, "stream": True}, stream=False)


# ---- golden: stream and message translation ------------------------------------------------------------


def _translate(events: list[list[Any]]) -> dict[str, Any]:
    translator = AnthropicStreamTranslator(created=CREATED)
    chunks: list[Any] = []
    try:
        for name, data in events:
            chunks.extend(translator.feed(name, data))
    except UpstreamError as exc:
        return {"chunks": chunks, "error": exc.message}
    chunks.extend(translator.finish())
    return {"chunks": chunks, "done": translator.done}


@pytest.mark.parametrize("path", _golden("stream"), ids=lambda p: p.stem)
def test_stream_translation_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    check_golden(path, doc, _translate(doc["events"]))


@pytest.mark.parametrize("path", _golden("message"), ids=lambda p: p.stem)
def test_message_translation_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    try:
        actual: Any = {"chunks": message_to_chunks(doc["message"], created=CREATED)}
    except UpstreamError as exc:
        actual = {"error": exc.message}
    check_golden(path, doc, actual)


def _pump(chunks: list[dict[str, Any]], *, saw_done: bool) -> tuple[list[dict[str, Any]], Any]:
    return pump_chunks("claude-x", chunks, saw_done=saw_done)


def test_translated_tool_stream_folds_into_complete_tool_calls() -> None:
    doc = json.loads((GOLDEN / "stream_tool_use.json").read_text())
    got = _translate(doc["events"])
    _, result = _pump(got["chunks"], saw_done=got["done"])
    assert result.text == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("toolu_01A", "get_weather", '{"city": "Paris"}'),
        ("toolu_01B", "get_time", "{}"),
    ]
    assert result.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 25, "completion_tokens": 12, "total_tokens": 37}


def test_translated_thinking_stream_gives_reasoning_then_text() -> None:
    doc = json.loads((GOLDEN / "stream_thinking_text.json").read_text())
    got = _translate(doc["events"])
    out, result = _pump(got["chunks"], saw_done=got["done"])
    assert result.reasoning == "Let me think."
    assert result.text == "Answer"
    assert result.finish_reason == "length"
    first_content = next(
        i for i, c in enumerate(out) if c.get("choices") and c["choices"][0]["delta"].get("content")
    )
    assert any(c["choices"][0]["delta"].get("reasoning_content") for c in out[:first_content])


def test_stream_with_neither_stop_reason_nor_message_stop_is_a_cut() -> None:
    doc = json.loads((GOLDEN / "stream_no_stop_reason.json").read_text())
    got = _translate(doc["events"])
    assert got["done"] is False
    with pytest.raises(UpstreamError, match="stream ended unexpectedly"):
        _pump(got["chunks"], saw_done=False)


# ---- errors and the classifier -----------------------------------------------------------------------


def _http(status: int, kind: str, message: str, retry_after: float | None = None) -> UpstreamError:
    from freellm.engine.failure import http_error_message

    body = {"type": "error", "error": {"type": kind, "message": message}}
    return UpstreamError(
        http_error_message(status, anthropic_error_message(body)),
        status=status,
        retry_after_s=retry_after,
        body=body,
    )


@pytest.mark.parametrize(
    ("err", "kind", "error_class"),
    [
        (_http(529, "overloaded_error", "Overloaded"), FailureKind.RETRYABLE, "upstream_error"),
        (_http(500, "api_error", "Internal server error"), FailureKind.RETRYABLE, "upstream_error"),
        (
            _http(
                429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", 7
            ),
            FailureKind.RETRYABLE,
            "rate_limited",
        ),
        (_http(401, "authentication_error", "invalid x-api-key"), FailureKind.KEY_AUTH, "auth"),
        (
            _http(
                403,
                "permission_error",
                "Your API key does not have permission to use the specified resource.",
            ),
            FailureKind.RETRYABLE,
            "forbidden",
        ),
        (_http(404, "not_found_error", "model: claude-nope"), FailureKind.RETRYABLE, "model_not_found"),
        (
            _http(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
            FailureKind.RETRYABLE,
            "context_too_large",
        ),
        (
            _http(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
            FailureKind.RETRYABLE,
            "context_too_large",
        ),
        (
            _http(
                400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API."
            ),
            FailureKind.RETRYABLE,
            "out_of_credits",
        ),
        (
            _http(
                400,
                "invalid_request_error",
                "messages.1.content.0.text: text content blocks must be non-empty",
            ),
            FailureKind.RETRYABLE,
            "provider_bad_request",
        ),
        (
            inband_error({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            FailureKind.RETRYABLE,
            "upstream_error",
        ),
        (
            inband_error({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
            FailureKind.RETRYABLE,
            "rate_limited",
        ),
        (
            inband_error({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}),
            FailureKind.KEY_AUTH,
            "auth",
        ),
        (
            inband_error(
                {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
            ),
            FailureKind.RETRYABLE,
            "upstream_error",
        ),
    ],
    ids=lambda v: getattr(v, "message", None) or str(v),
)
def test_anthropic_errors_classify_like_their_meaning(
    err: UpstreamError, kind: FailureKind, error_class: str
) -> None:
    failure = classify(err)
    assert failure.kind is kind
    assert failure.error_class == error_class


def test_overloaded_is_provider_health_and_rate_limit_keeps_its_hint() -> None:
    overloaded = classify(_http(529, "overloaded_error", "Overloaded"))
    assert overloaded.skip_provider and not overloaded.provider_bad_request
    limited = classify(_http(429, "rate_limit_error", "slow down", retry_after=7))
    assert limited.rate_limit_signal and limited.retry_after_s == 7


def test_error_message_wording() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert anthropic_error_message(body) == "overloaded_error: Overloaded"
    assert anthropic_error_message({"error": {"message": "plain"}}) == "plain"
    assert anthropic_error_message("<html>bad gateway</html>") == "<html>bad gateway</html>"
    assert inband_error(body).message == "in-band provider error: overloaded_error: Overloaded"


def test_registry_builds_anthropic_providers() -> None:
    providers = build_providers([_config("https://api.anthropic.com/v1")], None)  # type: ignore[arg-type]
    assert isinstance(providers["ant"], AnthropicProvider)


# ---- the simulator's Anthropic wire -----------------------------------------------------------------


def _plan_frames(scenario: dict[str, Any], *, stream: bool = True) -> list[tuple[str, Any, FrameKind]]:
    sc = parse_scenario(scenario)
    view = ANTHROPIC_WIRE.parse_request(
        {"model": "m", "max_tokens": 10, "stream": stream, "messages": [{"role": "user", "content": "hi"}]},
        {},
    )
    plan = build_plan(sc, "p", "m", view.prompt_chars, "abcd1234")
    out = []
    for data, kind in ANTHROPIC_WIRE.render_stream(plan, sc, view, "msg_sim_1", CREATED):
        text = data.decode()
        name, _, rest = text.partition("\n")
        try:
            out.append((name[len("event: ") :], json.loads(rest[len("data: ") :]), kind))
        except ValueError:
            out.append(("", text, kind))  # garbage (malformed) and comments
    return out


def test_sim_stream_event_sequence() -> None:
    frames = _plan_frames(
        {
            "text": "Hi there",
            "chunks": 2,
            "reasoning": "hmm",
            "tool_calls": [{"name": "f", "arguments": {"a": 1}}],
        }
    )
    names = [n for n, _, _ in frames]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",  # thinking
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",  # signature
        "content_block_stop",
        "content_block_start",  # text
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",  # tool_use
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data, _ in frames)
    assert frames[0][1]["message"]["content"] == [] and frames[0][1]["message"]["usage"]["output_tokens"] == 1
    assert frames[5][1]["delta"]["type"] == "signature_delta"
    assert frames[11][1]["content_block"] == {
        "type": "tool_use",
        "id": "call_abcd1234_0",
        "name": "f",
        "input": {},
    }
    assert "".join(d["delta"]["partial_json"] for n, d, _ in frames[12:15]) == '{"a": 1}'
    assert frames[-2][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    content = [k for _, _, k in frames if k is FrameKind.CONTENT]
    assert len(content) == 2 + 1 + 3  # text deltas, tool start, fragments: as counted on the OpenAI wire


def test_sim_stream_faults() -> None:
    inband = _plan_frames({"text": "abc", "chunks": 3, "inband_error": "Overloaded", "inband_error_after": 1})
    assert [n for n, _, _ in inband][-1] == "error"
    assert inband[-1][1]["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert sum(1 for _, _, k in inband if k is FrameKind.CONTENT) == 1
    assert "message_stop" not in [n for n, _, _ in inband]
    not_done = _plan_frames({"done": False})
    assert [n for n, _, _ in not_done][-1] == "message_delta"
    empty = _plan_frames({"empty": True})
    assert not any(d.get("delta", {}).get("type") == "text_delta" for _, d, _ in empty if isinstance(d, dict))
    assert _plan_frames({"finish_reason": "length"})[-2][1]["delta"]["stop_reason"] == "max_tokens"
    assert _plan_frames({"finish_reason": None})[-2][1]["delta"]["stop_reason"] is None
    no_usage = _plan_frames({"usage": "none"})
    assert "usage" not in no_usage[0][1]["message"] and "usage" not in no_usage[-2][1]
    malformed = _plan_frames({"malformed": True})
    garbage = [d for n, d, _ in malformed if n == ""]
    assert len(garbage) >= 3 and any("{not json" in g for g in garbage)


def test_sim_error_envelopes() -> None:
    assert ANTHROPIC_WIRE.render_error(529, "Overloaded") == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }
    assert ANTHROPIC_WIRE.render_error(429, "x")["error"]["type"] == "rate_limit_error"
    assert ANTHROPIC_WIRE.render_error(401, "x")["error"]["type"] == "authentication_error"
    assert ANTHROPIC_WIRE.render_error(418, "x")["error"]["type"] == "invalid_request_error"
    assert ANTHROPIC_WIRE.render_error(503, "x")["error"]["type"] == "api_error"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
        (
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "n": 1},
            "n: Extra inputs",
        ),
        (
            {"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
            'Unexpected role "system"',
        ),
        ({"model": "m", "max_tokens": 5, "messages": []}, "at least one message"),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}],
            },
            "non-empty",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "temperature": 1.5,
                "messages": [{"role": "user", "content": "x"}],
            },
            "temperature",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "stop_sequences": [" "],
                "messages": [{"role": "user", "content": "x"}],
            },
            "non-whitespace",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y "}],
            },
            "trailing whitespace",
        ),
        (
            {
                "model": "m",
                "max_tokens": 2000,
                "thinking": {"type": "enabled", "budget_tokens": 4000},
                "messages": [{"role": "user", "content": "x"}],
            },
            "greater than `thinking.budget_tokens`",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {"role": "user", "content": "no result"},
                ],
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            },
            "without `tool_result` blocks immediately after: t1",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "r"}],
                    }
                ],
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            },
            "unexpected `tool_use_id`",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
                ],
            },
            "must define tools",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "system": [{"type": "text", "text": "s", "cache_control": EPH}],
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "a", "cache_control": EPH},
                            {"type": "text", "text": "b", "cache_control": EPH},
                            {"type": "text", "text": "c", "cache_control": EPH},
                            {"type": "text", "text": "d", "cache_control": EPH},
                        ],
                    }
                ],
            },
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]}],
            },
            "messages.0.content.0.cache_control.type: Input should be 'ephemeral'",
        ),
    ],
)
def test_sim_rejects_what_anthropic_rejects(body: dict[str, Any], fragment: str) -> None:
    with pytest.raises(WireRequestError, match=None) as info:
        ANTHROPIC_WIRE.parse_request(body, {})
    assert fragment in str(info.value)


# ---- the provider against the simulator (I/O, timeouts, statuses) -----------------------------------


def _config(base_url: str, name: str = "ant") -> ProviderConfig:
    return ProviderConfig(name=name, kind="anthropic", base_url=base_url, keys=["k"])


CHAT = {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]}
FAST = Timeouts(connect=2, first_byte=2, stall=2)


async def _collect(
    provider: AnthropicProvider, *, stream: bool, timeouts: Timeouts = FAST
) -> tuple[list[Any], bool]:
    body = parse_chat_request(CHAT).upstream_body("claude-x", stream=stream)
    upstream = await provider.open(body, "sk-ant-1", stream=stream, timeouts=timeouts)
    try:
        chunks = [c async for c in upstream]
    finally:
        await upstream.aclose()
    return chunks, upstream.saw_done


async def test_provider_streams_and_sends_anthropic_headers(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    await ctl.script_async(
        "ant", {"text": "Hello there", "reasoning": "hm", "malformed": True, "keepalive_comments": 2}
    )
    chunks, done = await _collect(provider, stream=True)
    assert done is True
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    reasoning = "".join(
        c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks if c["choices"]
    )
    assert (text, reasoning) == ("Hello there", "hm")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]["prompt_tokens"] >= 1
    [record] = await ctl.requests_async("ant")
    assert record["key"] == "sk-ant-1"
    assert record["body"]["system"] == "sys" and record["body"]["stream"] is True


async def test_provider_non_stream_message(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    await ctl.script_async("ant", {"tool_calls": [{"name": "f", "arguments": {"x": 1}, "id": "toolu_9"}]})
    chunks, done = await _collect(provider, stream=False)
    assert done is True
    [chunk] = chunks
    assert chunk["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "id": "toolu_9", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    ]
    assert chunk["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("stream", [True, False])
async def test_provider_http_errors_carry_status_hint_and_body(sim_and_session: Any, stream: bool) -> None:
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    await ctl.script_async("ant", {"status": 429, "retry_after": 12, "error_message": "rate limited"})
    with pytest.raises(UpstreamError) as info:
        await _collect(provider, stream=stream)
    err = info.value
    assert (err.status, err.retry_after_s) == (429, 12.0)
    assert err.message == "API error 429: rate_limit_error: rate limited"
    assert err.body["error"]["type"] == "rate_limit_error"
    await ctl.script_async("ant", {"status": 529, "error_message": "Overloaded"})
    with pytest.raises(UpstreamError) as info:
        await _collect(provider, stream=stream)
    assert info.value.status == 529 and classify(info.value).kind is FailureKind.RETRYABLE


async def test_provider_inband_error_event_and_non_stream_error_body(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    await ctl.script_async("ant", {"inband_error": "Overloaded"})
    with pytest.raises(UpstreamError, match="in-band provider error: overloaded_error: Overloaded"):
        await _collect(provider, stream=True)
    await ctl.script_async("ant", {"inband_error": "boom"})
    with pytest.raises(UpstreamError, match="in-band provider error: api_error: boom"):
        await _collect(provider, stream=False)


async def test_provider_hands_out_chunks_decoded_before_an_error_event(sim_and_session: Any) -> None:
    """Frames that arrive in the same read as the error event are delivered first, then the error."""
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    await ctl.script_async(
        "ant", {"text": "aaaabbbbcccc", "chunks": 3, "inband_error": "Overloaded", "inband_error_after": 2}
    )
    body = parse_chat_request(CHAT).upstream_body("claude-x", stream=True)
    upstream = await provider.open(body, "k", stream=True, timeouts=FAST)
    received: list[str] = []
    with pytest.raises(UpstreamError, match="overloaded_error"):
        async for chunk in upstream:
            if chunk["choices"]:
                received.append(chunk["choices"][0]["delta"].get("content") or "")
    await upstream.aclose()
    assert "".join(received) == "aaaabbbb"
    with pytest.raises(UpstreamError):  # the error sticks
        await upstream.__anext__()


async def test_provider_timeouts_and_transport_match_the_openai_wire(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    short = Timeouts(connect=1, first_byte=0.3, stall=0.3)
    await ctl.script_async("ant", {"first_byte_delay_ms": 2000})
    with pytest.raises(UpstreamError, match="no first byte within") as info:
        await _collect(provider, stream=True, timeouts=short)
    assert info.value.timeout
    await ctl.script_async("ant", {"stall_after": 1, "chunks": 3})
    with pytest.raises(UpstreamError, match="stream stalled") as info:
        await _collect(provider, stream=True, timeouts=short)
    assert info.value.timeout
    await ctl.script_async("ant", {"cut_after": 1, "chunks": 3})
    with pytest.raises(UpstreamError, match="stream ended unexpectedly") as info:
        await _collect(provider, stream=True)
    assert info.value.transport
    dead = AnthropicProvider(_config("http://127.0.0.1:9/v1"), session)
    with pytest.raises(UpstreamError, match="fetch failed") as info:
        await _collect(dead, stream=True)
    assert info.value.transport


async def test_provider_stream_without_message_stop(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = AnthropicProvider(_config(sim.provider_url("ant")), session)
    await ctl.script_async("ant", {"done": False, "text": "ok"})
    chunks, done = await _collect(provider, stream=True)
    assert done is False
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_provider_config_headers_are_sent(sim_and_session: Any) -> None:
    sim = sim_and_session[0]
    cfg = ProviderConfig(
        name="ant", kind="anthropic", base_url=sim.provider_url("ant"), headers={"anthropic-beta": "x-1"}
    )
    seen: dict[str, str] = {}

    async def on_request_start(_s: Any, _ctx: Any, params: aiohttp.TraceRequestStartParams) -> None:
        seen.update(params.headers)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    async with aiohttp.ClientSession(trace_configs=[trace]) as traced:
        await _collect(AnthropicProvider(cfg, traced), stream=True)
    assert seen["x-api-key"] == "sk-ant-1"
    assert seen["anthropic-version"] == "2023-06-01"
    assert seen["anthropic-beta"] == "x-1"
    assert "Authorization" not in seen
