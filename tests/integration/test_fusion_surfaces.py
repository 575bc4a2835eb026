"""Over the wire: the ``fusion`` virtual model on the Responses (``/v1/responses``) and Anthropic Messages
(``/v1/messages``) surfaces, driven by the official ``openai`` and ``anthropic`` SDKs and by raw HTTP.

Every test starts its own gateway in front of the shared simulator with fresh provider names, so the
panel's and the judge's upstream calls can be read back per provider. The simulator answers each
provider with ``Hello from {provider}/{model}.``, so every panel answer is distinct and the judge's
prompt can be checked for each of them. The judge is routed like ``auto``: the first chain route.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2 as httpx
import openai
import pytest

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import AUTH, MakeGateway, anthropic_sdk, received, sdk, upstream

MODEL = "model-x"
ANTHROPIC_HEADERS = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
PROMPT = "Name one prime number."


# ---- helpers --------------------------------------------------------------------------------------------


@dataclass
class Trio:
    """A gateway whose chain is ``a/model-x``, ``b/model-x``, ``c/model-x`` (fresh provider names)."""

    gw: GatewayServer
    a: str
    b: str
    c: str

    @property
    def providers(self) -> tuple[str, str, str]:
        return (self.a, self.b, self.c)


def trio(make_gateway: MakeGateway, **kwargs: Any) -> Trio:
    a, b, c = unique("alpha"), unique("beta"), unique("gamma")
    return Trio(make_gateway({a: [MODEL], b: [MODEL], c: [MODEL]}, **kwargs), a, b, c)


def greeting(provider: str) -> str:
    """The simulator's default answer for ``provider``."""
    return f"Hello from {provider}/{MODEL}."


def sim_tokens(chars: int) -> int:
    """The simulator's token count for ``chars`` characters (chars // 4, at least 1)."""
    return max(1, chars // 4)


def prompt_chars(body: dict[str, Any]) -> int:
    """The characters the simulator counts as the prompt of an OpenAI-wire body (string contents)."""
    total = 0
    for message in body["messages"]:
        content = message.get("content")
        assert isinstance(content, str), "fusion sends plain-text messages upstream here"
        total += len(content)
    return total


def call_usage(body: dict[str, Any], answer: str) -> tuple[int, int]:
    """(prompt, completion) tokens the simulator reported for one call."""
    return sim_tokens(prompt_chars(body)), sim_tokens(len(answer))


def judge_body(sim_control: SimControl, judge: str) -> dict[str, Any]:
    """The last body the judge's provider received: the judge call."""
    bodies = received(sim_control, judge)
    assert bodies, f"{judge} received nothing"
    return bodies[-1]


def judge_prompt(body: dict[str, Any]) -> str:
    """The judge's last user turn: the listing of the panel's answers."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    text: str = last["content"]
    return text


def assert_lists_answers(prompt: str, answers: list[str]) -> None:
    """Every answer appears under its own ``--- Response i ---`` header, in that order."""
    for i, answer in enumerate(answers, 1):
        assert f"--- Response {i} ---\n{answer}" in prompt, (i, answer, prompt)
    assert f"--- Response {len(answers) + 1} ---" not in prompt


def nothing_upstream(sim_control: SimControl, *providers: str) -> None:
    for provider in providers:
        assert upstream(sim_control, provider) == [], provider


@dataclass
class ResponsesEvents:
    status: int
    headers: httpx.Headers
    events: list[dict[str, Any]] = field(default_factory=list)
    json_body: Any = None
    other_lines: list[str] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def first(self, kind: str) -> int:
        return self.types.index(kind)


def post_responses(gw: GatewayServer, payload: Any) -> ResponsesEvents:
    """POST to ``/v1/responses``; the SSE frames (checking each ``event:`` line against ``type``) or the
    JSON body."""
    kwargs: dict[str, Any] = {"content": payload} if isinstance(payload, (bytes, str)) else {"json": payload}
    with (
        httpx.Client(timeout=20.0) as client,
        client.stream("POST", f"{gw.v1}/responses", headers=AUTH, **kwargs) as resp,
    ):
        out = ResponsesEvents(status=resp.status_code, headers=resp.headers)
        if not resp.headers.get("content-type", "").startswith("text/event-stream"):
            resp.read()
            out.json_body = resp.json()
            return out
        event: str | None = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                assert event is None, "two event lines in one frame"
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                assert data["type"] == event
                out.events.append(data)
                event = None
            elif line.strip():
                out.other_lines.append(line)
    return out


@dataclass
class MessagesEvents:
    status: int
    headers: httpx.Headers
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    json_body: Any = None
    other_lines: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def first(self, name: str) -> int:
        return self.names.index(name)

    @property
    def text(self) -> str:
        return "".join(d["delta"].get("text", "") for n, d in self.events if n == "content_block_delta")


def post_messages(gw: GatewayServer, payload: Any) -> MessagesEvents:
    """POST to ``/v1/messages``; SSE events as (event, data) pairs, or the JSON body."""
    kwargs: dict[str, Any] = {"content": payload} if isinstance(payload, (bytes, str)) else {"json": payload}
    with (
        httpx.Client(timeout=20.0) as client,
        client.stream("POST", f"{gw.base_url}/v1/messages", headers=ANTHROPIC_HEADERS, **kwargs) as resp,
    ):
        out = MessagesEvents(status=resp.status_code, headers=resp.headers)
        if not resp.headers.get("content-type", "").startswith("text/event-stream"):
            resp.read()
            out.json_body = resp.json()
            return out
        event: str | None = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                assert event is None, "two event lines in one frame"
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                assert event is not None, "a data line without an event line"
                out.events.append((event, json.loads(line[len("data: ") :])))
                event = None
            elif line.strip():
                out.other_lines.append(line)
    return out


def messages_payload(fusion: Any, *, stream: bool = False, text: str = PROMPT) -> dict[str, Any]:
    return {
        "model": "fusion",
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": text}],
        "metadata": {"fusion": fusion},
    }


def responses_payload(fusion: Any, *, stream: bool = False, text: str = PROMPT) -> dict[str, Any]:
    return {"model": "fusion", "input": text, "stream": stream, "metadata": {"fusion": fusion}}


def assert_responses_error(body: Any, *, status_type: str = "invalid_request_error") -> dict[str, Any]:
    """The Responses envelope: exactly ``{"error": {...}}`` with message, type, param and code."""
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert {"message", "type", "param", "code"} <= set(err)
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] == status_type
    return err


def assert_anthropic_error(body: Any, kind: str) -> dict[str, Any]:
    """The Anthropic envelope: ``{"type": "error", "error": {"type", "message", ...}}``."""
    assert set(body) == {"type", "error"}, body
    assert body["type"] == "error"
    err: dict[str, Any] = body["error"]
    assert err["type"] == kind
    assert isinstance(err["message"], str) and err["message"]
    return err


def fusion_metadata(options: Any) -> Any:
    """``metadata`` carrying fusion options. The anthropic SDK types metadata as ``{user_id}`` only, but
    sends any other key as given."""
    return {"fusion": options}


def fusion_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``_fusion`` payloads of a stream's fusion progress events, in order."""
    return [e["_fusion"] for e in events]


# ---- Responses: non-stream --------------------------------------------------------------------------------


def test_responses_non_stream_sdk_judge_writes_the_answer(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway)
    raw = sdk(t.gw).responses.with_raw_response.create(
        model="fusion", input=PROMPT, metadata={"fusion": json.dumps({"k": 2})}
    )
    r = raw.parse()
    body = json.loads(raw.http_response.text)

    # The panel is the first two chain routes; the judge is routed like auto: the first chain route.
    assert r.model == "fusion" and body["model"] == "fusion"
    assert r.status == "completed" and r.object == "response"
    assert r.output_text == greeting(t.a)
    [item] = r.output
    assert item.type == "message" and item.role == "assistant"

    panel_a, judge_call = received(sim_control, t.a)
    [panel_b] = received(sim_control, t.b)
    nothing_upstream(sim_control, t.c)  # not on a panel of 2 and nothing failed: the pool stays idle
    for member in (panel_a, panel_b):
        assert member["stream"] is False
        assert member["model"] == MODEL
        assert member["messages"] == [{"role": "user", "content": PROMPT}]
        assert "fusion" not in member and "metadata" not in member
    assert judge_call == judge_body(sim_control, t.a)
    prompt = judge_prompt(judge_call)
    assert_lists_answers(prompt, [greeting(t.a), greeting(t.b)])
    assert judge_call["messages"][0]["role"] == "system"
    assert PROMPT in json.dumps(judge_call["messages"])
    assert "tools" not in judge_call and "fusion" not in judge_call

    summary = body["_fusion"]
    assert summary["synthesized"] is True
    assert summary["strategy"] == "synthesize"
    assert summary["tool_call_winner"] is None
    assert summary["panel"] == [
        {"provider": t.a, "model": MODEL, "status": "ok"},
        {"provider": t.b, "model": MODEL, "status": "ok"},
    ]
    assert summary["judge"] == {"provider": t.a, "model": MODEL}
    assert "members" not in summary  # expose_panel was not asked for

    # Usage: summed over every call (two members and the judge), so at least the panel's.
    panel_in = sum(call_usage(b, greeting(p))[0] for b, p in ((panel_a, t.a), (panel_b, t.b)))
    panel_out = sum(call_usage(b, greeting(p))[1] for b, p in ((panel_a, t.a), (panel_b, t.b)))
    judge_in, judge_out = call_usage(judge_call, greeting(t.a))
    assert r.usage is not None
    assert r.usage.input_tokens >= panel_in and r.usage.output_tokens >= panel_out
    assert r.usage.input_tokens == panel_in + judge_in
    assert r.usage.output_tokens == panel_out + judge_out
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens

    assert raw.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL} -> {t.a}/{MODEL})"
    assert raw.headers["x-request-id"]


def test_responses_non_stream_explicit_panel_judge_off_panel(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """Explicit members b and c; the judge (auto → a) is not on the panel, so the answer is unambiguously
    the judge's. Options sent as an object (raw HTTP) rather than a JSON string."""
    t = trio(make_gateway)
    members = [f"{t.b}/{MODEL}", f"{t.c}/{MODEL}"]
    out = post_responses(t.gw, responses_payload({"models": members}))

    assert out.status == 200, out.json_body
    body = out.json_body
    assert body["model"] == "fusion"
    [item] = body["output"]
    assert item["content"][0]["text"] == greeting(t.a)
    [judge_call] = received(sim_control, t.a)
    assert len(received(sim_control, t.b)) == 1 and len(received(sim_control, t.c)) == 1
    assert_lists_answers(judge_prompt(judge_call), [greeting(t.b), greeting(t.c)])
    assert body["_fusion"]["judge"] == {"provider": t.a, "model": MODEL}
    assert [m["provider"] for m in body["_fusion"]["panel"]] == [t.b, t.c]
    assert out.headers["x-routed-via"] == f"fusion({t.b}/{MODEL}+{t.c}/{MODEL} -> {t.a}/{MODEL})"
    # The stored response is the very object the client got.
    stored = sdk(t.gw).responses.retrieve(body["id"])
    assert stored.output_text == greeting(t.a) and stored.model == "fusion"


def test_responses_best_of_skips_the_judge(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    t = trio(make_gateway)
    sim_control.script(t.b, {"text": "Two is the only even prime, and the smallest."})
    r = sdk(t.gw).responses.with_raw_response.create(
        model="fusion", input=PROMPT, metadata={"fusion": json.dumps({"k": 2, "strategy": "best_of"})}
    )
    body = json.loads(r.http_response.text)
    assert r.parse().output_text == "Two is the only even prime, and the smallest."  # the longest answer
    assert body["_fusion"]["synthesized"] is False and body["_fusion"]["judge"] is None
    assert body["_fusion"]["strategy"] == "best_of"
    assert len(received(sim_control, t.a)) == 1  # its panel call only: no judge call
    assert r.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL})"


# ---- Responses: stream --------------------------------------------------------------------------------------


def test_responses_stream_sdk_helper_and_raw_order(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway)
    metadata = {"fusion": json.dumps({"k": 2})}

    with sdk(t.gw).responses.stream(model="fusion", input=PROMPT, metadata=metadata) as stream:
        sdk_types = [event.type for event in stream]
        final = stream.get_final_response()

    assert final.output_text == greeting(t.a)
    assert final.model == "fusion" and final.status == "completed"
    assert sdk_types[0] == "response.created" and sdk_types[-1] == "response.completed"
    judge_call = judge_body(sim_control, t.a)
    assert judge_call["stream"] is True
    assert_lists_answers(judge_prompt(judge_call), [greeting(t.a), greeting(t.b)])

    # The same request read off the wire.
    out = post_responses(t.gw, responses_payload(json.dumps({"k": 2}), stream=True))
    assert out.status == 200 and out.headers["content-type"].startswith("text/event-stream")
    assert out.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL})"
    assert out.other_lines == []
    types = out.types
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed" and types.count("response.completed") == 1
    assert "response.failed" not in types
    assert [e["sequence_number"] for e in out.events] == list(range(len(out.events)))

    progress = [e for e in out.events if e["type"] == "response.fusion"]
    assert all(set(e) == {"type", "sequence_number", "_fusion"} for e in progress)
    panel = [p for p in fusion_events(progress) if p["event"] == "panel"]
    judge = [p for p in fusion_events(progress) if p["event"] == "judge"]
    assert sorted(p["provider"] for p in panel) == sorted([t.a, t.b])
    assert all(p["model"] == MODEL and p["status"] == "ok" for p in panel)
    assert "content" not in json.dumps(panel)  # expose_panel off: no answers in the progress events
    assert judge == [{"event": "judge", "provider": t.a, "model": MODEL}]

    first_delta = out.first("response.output_text.delta")
    positions = [i for i, e in enumerate(out.events) if e["type"] == "response.fusion"]
    judge_at = next(i for i in positions if out.events[i]["_fusion"]["event"] == "judge")
    assert all(1 < i < first_delta for i in positions)  # after created/in_progress, before any text
    assert max(i for i in positions if out.events[i]["_fusion"]["event"] == "panel") < judge_at

    text = "".join(e["delta"] for e in out.events if e["type"] == "response.output_text.delta")
    assert text == greeting(t.a)
    completed = out.events[-1]["response"]
    assert completed["model"] == "fusion" and completed["status"] == "completed"
    assert completed["output"][0]["content"][0]["text"] == greeting(t.a)
    # The usage is summed over every call of this (second) request: its two members and its judge.
    bodies_a = received(sim_control, t.a)
    panel_a, judge_a = bodies_a[-2], bodies_a[-1]
    panel_b = received(sim_control, t.b)[-1]
    calls = [call_usage(b, greeting(p)) for b, p in ((panel_a, t.a), (panel_b, t.b), (judge_a, t.a))]
    assert completed["usage"]["input_tokens"] == sum(i for i, _ in calls)
    assert completed["usage"]["output_tokens"] == sum(o for _, o in calls)


def test_responses_stream_expose_panel_shows_each_answer(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway)
    out = post_responses(t.gw, responses_payload({"k": 3, "expose_panel": True}, stream=True))
    assert out.status == 200
    panel = [
        p
        for p in fusion_events([e for e in out.events if e["type"] == "response.fusion"])
        if p["event"] == "panel"
    ]
    assert {p["provider"]: p["content"] for p in panel} == {p: greeting(p) for p in t.providers}
    assert_lists_answers(judge_prompt(judge_body(sim_control, t.a)), [greeting(p) for p in t.providers])


def test_responses_judge_failing_falls_back_to_the_longest_answer(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """The judge fails on every route: the longest panel answer is the reply, unsynthesized — non-stream
    and stream alike."""
    long_answer = "Seven is prime: only one and seven divide it."

    def judge_down() -> Trio:
        t = trio(make_gateway)
        for p in t.providers:
            sim_control.script(
                p, {"status": 500, "error_message": "judge down"}, match="--- Response", times=None
            )
        sim_control.script(t.b, {"text": long_answer}, match=PROMPT)
        return t

    t = judge_down()

    raw = sdk(t.gw).responses.with_raw_response.create(
        model="fusion", input=PROMPT, metadata={"fusion": json.dumps({"k": 2})}
    )
    body = json.loads(raw.http_response.text)
    assert raw.parse().output_text == long_answer
    assert body["_fusion"]["synthesized"] is False and body["_fusion"]["judge"] is None
    assert [m["status"] for m in body["_fusion"]["panel"]] == ["ok", "ok"]
    assert raw.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL})"
    judged = [b for p in t.providers for b in received(sim_control, p) if "--- Response" in json.dumps(b)]
    assert judged, "the judge was tried"

    # The failed judge calls put every route on cooldown: the stream runs on a fresh gateway.
    t = judge_down()
    out = post_responses(t.gw, responses_payload(json.dumps({"k": 2}), stream=True))
    assert out.status == 200, out.json_body
    assert out.types[-1] == "response.completed" and "response.failed" not in out.types
    progress = fusion_events([e for e in out.events if e["type"] == "response.fusion"])
    assert [p["event"] for p in progress] == ["panel", "panel"]  # no judge event: it never answered
    assert "".join(e["delta"] for e in out.events if e["type"] == "response.output_text.delta") == long_answer
    assert [e["sequence_number"] for e in out.events] == list(range(len(out.events)))


def test_responses_stream_is_stored_and_retrievable(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway)
    client = sdk(t.gw)
    with client.responses.stream(
        model="fusion", input=PROMPT, metadata={"fusion": json.dumps({"k": 2})}
    ) as stream:
        final = stream.get_final_response()
    stored = client.responses.retrieve(final.id)
    assert stored.id == final.id and stored.model == "fusion"
    assert stored.output_text == greeting(t.a)
    [item] = stored.output
    [streamed] = final.output
    assert item.type == "message" and streamed.type == "message" and item.id == streamed.id


# ---- Messages: non-stream -----------------------------------------------------------------------------------


def test_messages_non_stream_sdk_judge_writes_the_answer(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway)
    raw = anthropic_sdk(t.gw).messages.with_raw_response.create(
        model="fusion",
        max_tokens=64,
        messages=[{"role": "user", "content": PROMPT}],
        metadata=fusion_metadata({"k": 2}),
    )
    msg = raw.parse()
    body = json.loads(raw.http_response.text)

    assert msg.model == "fusion" and msg.type == "message" and msg.role == "assistant"
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == greeting(t.a)  # type: ignore[union-attr]
    assert msg.stop_reason == "end_turn"

    panel_a, judge_call = received(sim_control, t.a)
    [panel_b] = received(sim_control, t.b)
    nothing_upstream(sim_control, t.c)
    for member in (panel_a, panel_b):
        assert member["stream"] is False and member["max_tokens"] == 64
        assert member["messages"] == [{"role": "user", "content": PROMPT}]
        assert "metadata" not in member
    assert_lists_answers(judge_prompt(judge_call), [greeting(t.a), greeting(t.b)])

    summary = body["_fusion"]
    assert summary["synthesized"] is True
    assert summary["judge"] == {"provider": t.a, "model": MODEL}
    assert [(m["provider"], m["status"]) for m in summary["panel"]] == [(t.a, "ok"), (t.b, "ok")]
    expected_in = sum(
        call_usage(b, greeting(p))[0] for b, p in ((panel_a, t.a), (panel_b, t.b), (judge_call, t.a))
    )
    expected_out = sum(
        call_usage(b, greeting(p))[1] for b, p in ((panel_a, t.a), (panel_b, t.b), (judge_call, t.a))
    )
    assert msg.usage.input_tokens == expected_in and msg.usage.output_tokens == expected_out
    assert raw.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL} -> {t.a}/{MODEL})"
    assert raw.headers["request-id"]


def test_messages_non_stream_options_as_json_string(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """The SDK types metadata values as strings: the options as a JSON string work the same way."""
    t = trio(make_gateway)
    members = f"{t.c}/{MODEL},{t.b}/{MODEL}"  # a comma-separated list fits a metadata string too
    msg = anthropic_sdk(t.gw).messages.create(
        model="fusion",
        max_tokens=64,
        messages=[{"role": "user", "content": PROMPT}],
        metadata=fusion_metadata(json.dumps({"models": members})),
    )
    assert msg.content[0].text == greeting(t.a)  # type: ignore[union-attr]
    [judge_call] = received(sim_control, t.a)
    assert_lists_answers(judge_prompt(judge_call), [greeting(t.c), greeting(t.b)])


def test_messages_defaults_without_metadata(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """No ``metadata.fusion``: the config's defaults (``default_k`` 4, so every one of the three routes)."""
    t = trio(make_gateway)
    raw = anthropic_sdk(t.gw).messages.with_raw_response.create(
        model="fusion", max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
    )
    body = json.loads(raw.http_response.text)
    assert raw.parse().content[0].text == greeting(t.a)  # type: ignore[union-attr]
    assert [m["provider"] for m in body["_fusion"]["panel"]] == list(t.providers)
    assert_lists_answers(judge_prompt(judge_body(sim_control, t.a)), [greeting(p) for p in t.providers])


def test_messages_dropped_member_and_pinned_judge(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """An unknown explicit member is dropped (and named) while the others answer; a pinned judge is used
    instead of the chain's first route."""
    t = trio(make_gateway)
    fusion = {"models": ["ghost/none", f"{t.a}/{MODEL}", f"{t.b}/{MODEL}"], "judge": f"{t.c}/{MODEL}"}
    out = post_messages(t.gw, messages_payload(fusion))
    assert out.status == 200, out.json_body
    body = out.json_body
    assert body["model"] == "fusion"
    assert body["content"] == [{"type": "text", "text": greeting(t.c)}]
    assert body["_fusion"]["panel"] == [
        {"provider": None, "model": "ghost/none", "status": "dropped", "reason": "unknown"},
        {"provider": t.a, "model": MODEL, "status": "ok"},
        {"provider": t.b, "model": MODEL, "status": "ok"},
    ]
    assert body["_fusion"]["judge"] == {"provider": t.c, "model": MODEL}
    [judge_call] = received(sim_control, t.c)
    assert_lists_answers(judge_prompt(judge_call), [greeting(t.a), greeting(t.b)])
    assert len(received(sim_control, t.a)) == 1  # its panel call only
    assert out.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL} -> {t.c}/{MODEL})"

    stream = post_messages(t.gw, messages_payload(fusion, stream=True))
    assert stream.status == 200
    progress = [d["_fusion"] for n, d in stream.events if n == "fusion"]
    assert progress[0] == {
        "event": "panel",
        "provider": None,
        "model": "ghost/none",
        "status": "dropped",
        "reason": "unknown",
    }
    assert progress[-1] == {"event": "judge", "provider": t.c, "model": MODEL}
    assert stream.text == greeting(t.c)


def test_messages_single_survivor_answers_without_a_judge(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """One member fails (a script for that one call only): the other's answer is the reply, no judge."""
    t = trio(make_gateway)
    members = [f"{t.b}/{MODEL}", f"{t.c}/{MODEL}"]
    sim_control.script(t.c, {"status": 500, "error_message": "member down"}, times=1)
    out = post_messages(t.gw, messages_payload({"models": members}))
    assert out.status == 200, out.json_body
    body = out.json_body
    assert body["content"] == [{"type": "text", "text": greeting(t.b)}]
    assert body["_fusion"]["synthesized"] is False and body["_fusion"]["judge"] is None
    assert [(m["provider"], m["status"]) for m in body["_fusion"]["panel"]] == [(t.b, "ok"), (t.c, "error")]
    nothing_upstream(sim_control, t.a)  # no judge was asked
    assert out.headers["x-routed-via"] == f"fusion({t.b}/{MODEL})"


# ---- Messages: stream ---------------------------------------------------------------------------------------


def test_messages_stream_sdk_helper_and_raw_order(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    t = trio(make_gateway)
    with anthropic_sdk(t.gw).messages.stream(
        model="fusion",
        max_tokens=64,
        messages=[{"role": "user", "content": PROMPT}],
        metadata=fusion_metadata(json.dumps({"k": 2})),
    ) as stream:
        sdk_types = [event.type for event in stream]
        final = stream.get_final_message()

    assert final.model == "fusion"
    assert [b.type for b in final.content] == ["text"]
    assert final.content[0].text == greeting(t.a)  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert sdk_types[0] == "message_start" and sdk_types[-1] == "message_stop"
    judge_call = judge_body(sim_control, t.a)
    assert judge_call["stream"] is True
    assert_lists_answers(judge_prompt(judge_call), [greeting(t.a), greeting(t.b)])

    out = post_messages(t.gw, messages_payload({"k": 2}, stream=True))
    assert out.status == 200 and out.headers["content-type"].startswith("text/event-stream")
    assert out.headers["x-routed-via"] == f"fusion({t.a}/{MODEL}+{t.b}/{MODEL})"
    assert out.other_lines == []
    assert all(data["type"] == name for name, data in out.events)
    names = out.names
    assert names[0] == "message_start" and names.count("message_start") == 1
    assert names[-2:] == ["message_delta", "message_stop"]
    assert "error" not in names
    assert out.events[0][1]["message"]["model"] == "fusion"

    first_delta = out.first("content_block_delta")
    progress = [(i, d["_fusion"]) for i, (n, d) in enumerate(out.events) if n == "fusion"]
    assert progress and all(0 < i < first_delta for i, _ in progress)
    assert out.first("content_block_start") > max(i for i, _ in progress)
    panel = [p for _, p in progress if p["event"] == "panel"]
    judge = [(i, p) for i, p in progress if p["event"] == "judge"]
    assert sorted(p["provider"] for p in panel) == sorted([t.a, t.b])
    assert all(p["status"] == "ok" and p["model"] == MODEL for p in panel)
    [(judge_at, judge_event)] = judge
    assert judge_event == {"event": "judge", "provider": t.a, "model": MODEL}
    assert all(i < judge_at for i, p in progress if p["event"] == "panel")
    assert out.text == greeting(t.a)
    delta = out.events[-2][1]
    assert delta["delta"]["stop_reason"] == "end_turn"
    bodies_a = received(sim_control, t.a)
    panel_b = received(sim_control, t.b)[-1]
    calls = [
        call_usage(b, greeting(p)) for b, p in ((bodies_a[-2], t.a), (panel_b, t.b), (bodies_a[-1], t.a))
    ]
    assert delta["usage"]["input_tokens"] == sum(i for i, _ in calls)
    assert delta["usage"]["output_tokens"] == sum(o for _, o in calls)


def test_messages_stream_no_survivor_is_an_in_band_error(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """A fusion stream opens before the panel answers, so a panel with no survivor is reported in band:
    one ``error`` event after the progress, and the stream ends there."""
    t = trio(make_gateway)
    for p in t.providers:
        sim_control.script(p, {"status": 500, "error_message": "boom"}, times=None)
    out = post_messages(t.gw, messages_payload({"k": 2}, stream=True))
    assert out.status == 200
    names = out.names
    assert names[0] == "message_start" and names[-1] == "error"
    assert "content_block_delta" not in names and "message_stop" not in names
    panel = [d["_fusion"] for n, d in out.events if n == "fusion"]
    assert {p["provider"] for p in panel} == set(t.providers)  # two members, then the refill
    assert all(p["status"] == "error" for p in panel)
    error = out.events[-1][1]
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert "every panel member failed" in error["error"]["message"]


def test_messages_stream_opens_before_the_panel_settles(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    """The headers, ``message_start`` and the fast member's progress event reach the client while the slow
    member is still being answered (compared with the simulator's own record of when that call ended)."""
    t = trio(make_gateway)
    sim_control.script(t.b, {"first_byte_delay_ms": 1500}, match=PROMPT)
    members = [f"{t.a}/{MODEL}", f"{t.b}/{MODEL}"]
    seen: dict[str, float] = {}
    names: list[str] = []
    with (
        httpx.Client(timeout=20.0) as client,
        client.stream(
            "POST",
            f"{t.gw.base_url}/v1/messages",
            headers=ANTHROPIC_HEADERS,
            json=messages_payload({"models": members}, stream=True),
        ) as resp,
    ):
        seen["headers"] = time.time()
        assert resp.status_code == 200
        event: str | None = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                assert event is not None
                names.append(event)
                data = json.loads(line[len("data: ") :])
                if event == "fusion" and data["_fusion"].get("provider") == t.a and "panel_a" not in seen:
                    seen["panel_a"] = time.time()
                seen.setdefault(event, time.time())
                event = None
    [slow] = [r for r in upstream(sim_control, t.b) if PROMPT in json.dumps(r["body"]["messages"][-1])]
    slow_ended = sim_control.wait_ended(slow["id"])["ended_at"]
    assert seen["headers"] < slow_ended
    assert seen["message_start"] < slow_ended
    assert seen["panel_a"] < slow_ended
    assert seen["content_block_delta"] > slow_ended  # the answer waits for the judge, after the panel
    assert names[0] == "message_start" and names[-1] == "message_stop"


# ---- bad options: 400 in the surface's envelope, nothing upstream ---------------------------------------

BAD_OPTIONS: list[tuple[str, Any, str, str]] = [
    # (id, metadata.fusion as sent, the param named, a fragment of the message)
    ("k-zero", {"k": 0}, "metadata.fusion.k", "between 1 and 8"),
    ("k-hundred", {"k": 100}, "metadata.fusion.k", "between 1 and 8"),
    ("k-string", {"k": "two"}, "metadata.fusion.k", "valid integer"),
    ("k-zero-json", json.dumps({"k": 0}), "metadata.fusion.k", "between 1 and 8"),
    ("k-string-json", json.dumps({"k": "two"}), "metadata.fusion.k", "valid integer"),
    ("not-json", "{k: 2", "metadata.fusion", "JSON string"),
    ("not-object", [1, 2], "metadata.fusion", "object"),
    ("unknown-field", {"kk": 2}, "metadata.fusion", "kk"),
    ("bad-strategy", {"strategy": "vote"}, "metadata.fusion.strategy", "best_of"),
    ("k-bool", {"k": True}, "metadata.fusion.k", "valid integer"),
    ("expose-not-bool", {"expose_panel": "yes"}, "metadata.fusion.expose_panel", "boolean"),
    ("empty-judge", {"judge": " "}, "metadata.fusion.judge", "non-empty string"),
]


@pytest.mark.parametrize(
    ("fusion", "param", "fragment"), [c[1:] for c in BAD_OPTIONS], ids=[c[0] for c in BAD_OPTIONS]
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_responses_bad_options_are_400(
    make_gateway: MakeGateway, sim_control: SimControl, fusion: Any, param: str, fragment: str, stream: bool
) -> None:
    t = trio(make_gateway)
    out = post_responses(t.gw, responses_payload(fusion, stream=stream))
    assert out.status == 400, out.json_body
    err = assert_responses_error(out.json_body)
    assert err["param"] == param and err["code"] == "invalid_fusion_options"
    assert param in err["message"] and fragment in err["message"]
    nothing_upstream(sim_control, *t.providers)


@pytest.mark.parametrize(
    ("fusion", "param", "fragment"), [c[1:] for c in BAD_OPTIONS], ids=[c[0] for c in BAD_OPTIONS]
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_messages_bad_options_are_400(
    make_gateway: MakeGateway, sim_control: SimControl, fusion: Any, param: str, fragment: str, stream: bool
) -> None:
    t = trio(make_gateway)
    out = post_messages(t.gw, messages_payload(fusion, stream=stream))
    assert out.status == 400, out.json_body
    err = assert_anthropic_error(out.json_body, "invalid_request_error")
    assert err["code"] == "invalid_fusion_options"
    assert param in err["message"] and fragment in err["message"]
    nothing_upstream(sim_control, *t.providers)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_only_unknown_members_is_400_naming_them(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    t = trio(make_gateway)
    ghosts = ["ghost/none", "phantom-model"]

    out = post_responses(t.gw, responses_payload({"models": ghosts}, stream=stream))
    assert out.status == 400, out.json_body
    err = assert_responses_error(out.json_body)
    assert err["code"] == "fusion_no_panel" and err["param"] == "metadata.fusion.models"
    assert "ghost/none (unknown)" in err["message"] and "phantom-model (unknown)" in err["message"]

    msg = post_messages(t.gw, messages_payload(json.dumps({"models": ghosts}), stream=stream))
    assert msg.status == 400, msg.json_body
    aerr = assert_anthropic_error(msg.json_body, "invalid_request_error")
    assert aerr["code"] == "fusion_no_panel"
    assert "ghost/none (unknown)" in aerr["message"] and "phantom-model (unknown)" in aerr["message"]
    nothing_upstream(sim_control, *t.providers)


def test_unknown_judge_is_400(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    t = trio(make_gateway)
    out = post_responses(t.gw, responses_payload({"judge": "ghost/none"}))
    assert out.status == 400
    err = assert_responses_error(out.json_body)
    assert err["code"] == "fusion_unknown_judge" and "ghost/none" in err["message"]
    assert err["param"] == "metadata.fusion.judge"
    msg = post_messages(t.gw, messages_payload({"judge": "ghost/none"}, stream=True))
    assert msg.status == 400
    aerr = assert_anthropic_error(msg.json_body, "invalid_request_error")
    assert aerr["code"] == "fusion_unknown_judge" and "ghost/none" in aerr["message"]
    nothing_upstream(sim_control, *t.providers)


def test_bad_options_through_the_sdks(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    """The SDKs surface the 400 as their own BadRequestError with the envelope as its body."""
    t = trio(make_gateway)
    with pytest.raises(openai.BadRequestError) as oinfo:
        sdk(t.gw).responses.create(model="fusion", input=PROMPT, metadata={"fusion": json.dumps({"k": 100})})
    assert oinfo.value.status_code == 400
    assert oinfo.value.param == "metadata.fusion.k" and oinfo.value.code == "invalid_fusion_options"

    with pytest.raises(anthropic.BadRequestError) as ainfo:
        anthropic_sdk(t.gw).messages.create(
            model="fusion",
            max_tokens=64,
            messages=[{"role": "user", "content": PROMPT}],
            metadata=fusion_metadata("two"),
        )
    assert ainfo.value.status_code == 400
    assert_anthropic_error(ainfo.value.body, "invalid_request_error")
    nothing_upstream(sim_control, *t.providers)


# ---- Messages: no survivor ----------------------------------------------------------------------------------


def test_messages_no_survivor_is_502(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    t = trio(make_gateway)
    for p in t.providers:
        sim_control.script(p, {"status": 500, "error_message": "boom"}, times=None)

    out = post_messages(t.gw, messages_payload({"k": 2}))
    assert out.status == 502, out.json_body
    err = assert_anthropic_error(out.json_body, "api_error")
    assert err["code"] == "upstream_failed"
    assert "every panel member failed" in err["message"]
    for p in t.providers:  # both members, then the refill from the pool; never a judge
        assert p in err["message"]
        bodies = received(sim_control, p)
        assert bodies and all("--- Response" not in json.dumps(b) for b in bodies)

    # Through the SDK, on a fresh gateway and providers (the first one's routes are cooling down now).
    t = trio(make_gateway)
    for p in t.providers:
        sim_control.script(p, {"status": 500, "error_message": "boom"}, times=None)
    with pytest.raises(anthropic.InternalServerError) as info:
        anthropic_sdk(t.gw).messages.create(
            model="fusion",
            max_tokens=64,
            messages=[{"role": "user", "content": PROMPT}],
            metadata=fusion_metadata(json.dumps({"k": 2})),
        )
    assert info.value.status_code == 502
    assert_anthropic_error(info.value.body, "api_error")


def test_messages_every_member_rate_limited_is_429_with_retry_after(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway)
    for p in t.providers:
        sim_control.script(p, {"status": 429, "retry_after": 30, "error_message": "slow down"}, times=None)

    out = post_messages(t.gw, messages_payload({"k": 2}))
    assert out.status == 429, out.json_body
    err = assert_anthropic_error(out.json_body, "rate_limit_error")
    assert err["code"] == "rate_limit_exceeded"
    assert "rate-limited" in err["message"]
    assert isinstance(err["retryAtMs"], int) and err["retryAtMs"] > 0
    retry_after = int(out.headers["Retry-After"])
    assert 1 <= retry_after <= 60
    for p in t.providers:
        assert received(sim_control, p), p


# ---- models ---------------------------------------------------------------------------------------------------


def test_anthropic_models_list_has_fusion(make_gateway: MakeGateway) -> None:
    t = trio(make_gateway)
    with httpx.Client(timeout=10.0) as h:
        resp = h.get(f"{t.gw.base_url}/v1/models", headers=ANTHROPIC_HEADERS)
    assert resp.status_code == 200
    body = resp.json()
    assert "object" not in body and body["has_more"] is False
    ids = [m["id"] for m in body["data"]]
    assert ids[:2] == ["auto", "fusion"]
    [entry] = [m for m in body["data"] if m["id"] == "fusion"]
    assert entry["type"] == "model" and entry["display_name"] and entry["created_at"]

    page = anthropic_sdk(t.gw).models.list()
    assert "fusion" in [m.id for m in page.data]


def test_fusion_disabled_is_not_listed_and_unknown(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    t = trio(make_gateway, extra={"fusion": {"enabled": False}})
    with httpx.Client(timeout=10.0) as h:
        listed = h.get(f"{t.gw.base_url}/v1/models", headers=ANTHROPIC_HEADERS).json()
    assert "fusion" not in [m["id"] for m in listed["data"]]
    out = post_responses(t.gw, responses_payload({"k": 2}))
    assert out.status == 400
    assert_responses_error(out.json_body)
    nothing_upstream(sim_control, *t.providers)
