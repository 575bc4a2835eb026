"""Over the wire: the legacy ``POST /v1/completions`` surface.

Each test starts its own gateway in front of the shared simulator (fresh provider names), drives it with
the official ``openai`` SDK (``client.completions.create``, stream and non-stream) or with raw HTTP where
the SDK would hide frames, and checks both what the client saw and what the simulator received: the
autocomplete chat prompt, ``max_tokens``, ``stop`` and the sampling fields.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
import openai
import pytest

from freellm.sim.control import SimControl
from freellm.surfaces.openai_completions import AUTOCOMPLETE_SYSTEM_PROMPT
from tests.harness import CLIENT_KEY, GatewayServer
from tests.integration.helpers import AUTH, MakeGateway, ended, one_route, sdk, two_routes, upstream

MODEL = "model-x"

PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"
USER_WITH_SUFFIX = (
    f"Prefix before cursor:\n{PREFIX}\n\nSuffix after cursor:\n{SUFFIX}\n\nCompletion to insert:"
)


@dataclass
class RawStream:
    status: int
    headers: httpx.Headers
    data: list[str] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)
    json_body: Any = None

    @property
    def frames(self) -> list[dict[str, Any]]:
        return [json.loads(d) for d in self.data if d != "[DONE]"]

    @property
    def completions(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if "error" not in f]

    @property
    def text(self) -> str:
        return "".join(f["choices"][0]["text"] for f in self.completions if f["choices"])


def post(gw: GatewayServer, payload: Any, *, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{gw.v1}/completions", json=payload, headers={**AUTH, **(headers or {})}, timeout=20)


def stream_raw(gw: GatewayServer, payload: dict[str, Any]) -> RawStream:
    """POST a streaming completion and read every ``data:`` line off the wire."""
    with (
        httpx.Client(timeout=20) as client,
        client.stream("POST", f"{gw.v1}/completions", json={**payload, "stream": True}, headers=AUTH) as resp,
    ):
        out = RawStream(status=resp.status_code, headers=resp.headers)
        if resp.status_code != 200:
            resp.read()
            out.json_body = resp.json()
            return out
        for line in resp.iter_lines():
            if line.startswith("data: "):
                out.data.append(line[len("data: ") :])
            elif line.strip():
                out.other_lines.append(line)
    return out


def assert_failed_over_once(headers: Any, first: str, second: str) -> None:
    assert headers["x-routed-via"] == f"{second}/{MODEL}"
    assert headers["x-fallback-attempts"] == "1"
    trail = headers["x-fallback-trail"]
    assert trail.startswith(f"{first}/{MODEL} key1=") and ";" not in trail


# ---- non-stream ---------------------------------------------------------------------------------------


def test_non_stream_completion_over_the_autocomplete_prompt(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "return a + b", "chunks": 3})

    raw = sdk(gw).completions.with_raw_response.create(
        model="auto", prompt=PREFIX, suffix=SUFFIX, stop=["\n\n", "\ndef "], temperature=0.2, top_p=0.9
    )
    completion = raw.parse()

    assert completion.object == "text_completion"
    assert completion.id.startswith("cmpl-") and not completion.id.startswith("cmpl-chatcmpl")
    assert completion.model == MODEL
    assert isinstance(completion.created, int)
    [choice] = completion.choices
    assert choice.text == "return a + b"
    assert choice.index == 0 and choice.finish_reason == "stop" and choice.logprobs is None
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert raw.headers["content-type"].startswith("application/json")

    [seen] = ended(sim_control, a)
    sent = seen["body"]
    assert sent["messages"] == [
        {"role": "system", "content": AUTOCOMPLETE_SYSTEM_PROMPT},
        {"role": "user", "content": USER_WITH_SUFFIX},
    ]
    assert "code autocomplete engine" in sent["messages"][0]["content"]
    assert sent["max_tokens"] == 128  # absent → the configured default
    assert sent["stop"] == ["\n\n", "\ndef "]
    assert sent["temperature"] == 0.2 and sent["top_p"] == 0.9
    assert sent["stream"] is False and sent["model"] == MODEL
    assert not {"prompt", "suffix", "echo", "n", "best_of", "logprobs"} & set(sent)

    rows = gw.run(gw.state.store.recent_requests(5))
    assert [(r.surface, r.outcome, r.stream) for r in rows] == [("completions", "success", False)]


def test_client_max_tokens_and_a_long_stop_list_are_forwarded(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    stops = ["\n", "}", ";", "<|end|>", "<|fim_suffix|>", "<|fim_middle|>"]

    completion = sdk(gw).completions.create(
        model=MODEL, prompt="function demo() {", max_tokens=16, stop=stops
    )

    assert completion.choices[0].text == f"Hello from {a}/{MODEL}."
    [seen] = upstream(sim_control, a)
    assert seen["body"]["max_tokens"] == 16
    assert seen["body"]["stop"] == stops[:4]
    assert (
        seen["body"]["messages"][1]["content"]
        == "Prefix before cursor:\nfunction demo() {\n\nCompletion to insert:"
    )


def test_non_stream_reasoning_is_never_in_the_text(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"reasoning": "SECRET-REASONING", "text": "x + 1"})

    completion = sdk(gw).completions.create(model="auto", prompt="y = ")

    assert completion.choices[0].text == "x + 1"
    assert "SECRET" not in completion.model_dump_json()


def test_echo_prepends_the_prompt(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "42"})
    sim_control.script(a, {"text": "42", "chunks": 2})
    client = sdk(gw)

    assert client.completions.create(model="auto", prompt="x = ", echo=True).choices[0].text == "x = 42"
    streamed = client.completions.create(model="auto", prompt="x = ", echo=True, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == "x = 42"


def test_non_stream_failure_before_the_answer_fails_over_invisibly(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 503, "error_message": "overloaded"})
    sim_control.script(b, {"text": "from beta"})

    raw = sdk(gw).completions.with_raw_response.create(model="auto", prompt="x")

    assert raw.parse().choices[0].text == "from beta"
    assert_failed_over_once(raw.headers, a, b)
    [first] = ended(sim_control, a)
    [second] = ended(sim_control, b)
    assert first["body"]["messages"] == second["body"]["messages"]


# ---- stream -------------------------------------------------------------------------------------------


def test_stream_with_the_sdk(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "return a + b", "chunks": 4})

    raw = sdk(gw).completions.with_raw_response.create(
        model="auto", prompt=PREFIX, suffix=SUFFIX, stop="\n\n", stream=True, max_tokens=40
    )
    chunks = list(raw.parse())

    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert all(c.object == "text_completion" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("cmpl-")
    assert all(isinstance(c.choices[0].text, str) for c in chunks)
    assert "".join(c.choices[0].text for c in chunks) == "return a + b"
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)  # not asked for

    [seen] = ended(sim_control, a)
    sent = seen["body"]
    assert sent["stream"] is True and sent["max_tokens"] == 40 and sent["stop"] == "\n\n"
    assert sent["messages"][1]["content"] == USER_WITH_SUFFIX
    assert "stream_options" not in sent


def test_stream_usage_when_asked(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)

    chunks = list(
        sdk(gw).completions.create(
            model="auto", prompt="x = ", stream=True, stream_options={"include_usage": True}
        )
    )

    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert [c for c in chunks if c.usage is not None] == [chunks[-1]]
    [seen] = upstream(sim_control, a)
    assert seen["body"]["stream_options"] == {"include_usage": True}


def test_stream_raw_frames_reasoning_is_dropped_and_text_always_a_string(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"reasoning": "SECRET-REASONING", "text": "x + 1", "chunks": 2})

    raw = stream_raw(gw, {"model": "auto", "prompt": "y = "})

    assert raw.status == 200 and raw.other_lines == []
    assert raw.data[-1] == "[DONE]" and raw.data.count("[DONE]") == 1
    assert not any("SECRET" in d for d in raw.data)
    frames = raw.completions
    assert all(f["object"] == "text_completion" and isinstance(f["choices"][0]["text"], str) for f in frames)
    assert frames[0]["choices"][0]["text"] != ""  # nothing is sent before the first text
    assert raw.text == "x + 1"
    assert [f["choices"][0]["finish_reason"] for f in frames] == [None, None, "stop"]
    assert set(frames[0]) == {"id", "object", "created", "model", "choices"}
    first = frames[0]["choices"][0]
    assert first == {"text": first["text"], "index": 0, "logprobs": None, "finish_reason": None}


def test_stream_failure_before_the_first_token_fails_over_invisibly(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    # alpha streams its role and reasoning, then dies before any text: nothing has reached the client
    sim_control.script(a, {"reasoning": "hmm", "cut_after": 0})
    sim_control.script(b, {"text": "from beta", "chunks": 3})

    raw = sdk(gw).completions.with_raw_response.create(model="auto", prompt="x", stream=True)
    chunks = list(raw.parse())

    assert "".join(c.choices[0].text for c in chunks) == "from beta"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert_failed_over_once(raw.headers, a, b)
    [first] = ended(sim_control, a)
    assert first["outcome"] == "cut"
    [second] = ended(sim_control, b)
    assert second["outcome"] == "completed"


def test_stream_http_error_before_the_first_token_fails_over_invisibly(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500, "error_message": "upstream exploded"})
    sim_control.script(b, {"text": "from beta"})

    raw = stream_raw(gw, {"model": "auto", "prompt": "x"})

    assert raw.status == 200 and raw.text == "from beta" and raw.data.count("[DONE]") == 1
    assert not [f for f in raw.frames if "error" in f]
    assert_failed_over_once(raw.headers, a, b)


def test_stream_failure_after_the_first_token_is_one_error_frame_then_done(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"text": "for i in range(10):", "chunks": 4, "cut_after": 2})

    raw = stream_raw(gw, {"model": "auto", "prompt": "x"})

    assert raw.status == 200 and raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert raw.other_lines == []
    assert raw.data[-1] == "[DONE]" and raw.data.count("[DONE]") == 1
    frames = raw.frames
    errors = [f for f in frames if "error" in f]
    assert len(errors) == 1 and "error" in frames[-1]  # the error frame is the last one
    error = errors[0]["error"]
    assert error["type"] == "stream_error"
    assert error["message"].startswith(f"Provider error ({a}): stream interrupted")
    texts = [f["choices"][0]["text"] for f in raw.completions]
    assert len(texts) == 2 and all(texts) and "".join(texts) == "for i in range(10):"[: len("".join(texts))]
    assert all(f["choices"][0]["finish_reason"] is None for f in raw.completions)  # no finish after a cut
    assert upstream(sim_control, b) == []  # committed: no failover
    [first] = ended(sim_control, a)
    assert first["outcome"] == "cut"


def test_stream_failure_after_the_first_token_raises_in_the_sdk(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, _ = two_routes(make_gateway)
    sim_control.script(a, {"text": "abcdefgh", "chunks": 4, "cut_after": 2})

    received: list[str] = []
    with pytest.raises(openai.APIError, match="stream interrupted"):
        for chunk in sdk(gw).completions.create(model="auto", prompt="x", stream=True):
            received.append(chunk.choices[0].text)
    assert "".join(received) == "abcd"


# ---- errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"model": "auto"}, "prompt"),
        ({"model": "auto", "prompt": 42}, "prompt"),
        ({"model": "auto", "prompt": ["a", "b"]}, "prompt"),
        ({"model": "auto", "prompt": [101, 102]}, "prompt"),
        ({"model": "auto", "prompt": "x", "max_tokens": "many"}, "max_tokens"),
        ({"model": "auto", "prompt": "x", "temperature": 9}, "temperature"),
        ({"model": "auto", "prompt": "x", "stop": {"a": 1}}, "stop"),
        ({"model": "auto", "prompt": "x", "n": 3}, "n"),
        ({"model": "auto", "prompt": "x", "best_of": 2}, "best_of"),
        ({"model": "auto", "prompt": "x", "logprobs": 2}, "logprobs"),
        ({"model": "auto", "prompt": "x", "echo": True, "suffix": "y"}, "echo"),
        ({"model": "auto", "prompt": "x", "stream": "yes"}, "stream"),
    ],
)
def test_bad_input_is_a_400_in_openais_envelope(
    make_gateway: MakeGateway, sim_control: SimControl, payload: dict[str, Any], param: str
) -> None:
    gw, a = one_route(make_gateway)

    resp = post(gw, payload)

    assert resp.status_code == 400, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.headers.get("x-request-id")
    err = resp.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param
    assert err["message"].startswith(f"Invalid request: {param}: ")
    assert upstream(sim_control, a) == []


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'"prompt"', b"null"])
def test_a_body_that_is_not_a_json_object_is_a_400(make_gateway: MakeGateway, content: bytes) -> None:
    gw, _ = one_route(make_gateway)
    resp = httpx.post(
        f"{gw.v1}/completions",
        content=content,
        headers={**AUTH, "Content-Type": "application/json"},
        timeout=20,
    )
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error"


def test_bad_input_raises_bad_request_in_the_sdk(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    with pytest.raises(openai.BadRequestError) as info:
        sdk(gw).completions.create(model="auto", prompt=[[1, 2], [3]])
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict) and info.value.body["param"] == "prompt"


def test_unknown_model_is_404_and_missing_key_is_401(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)

    missing = post(gw, {"model": "no-such-model", "prompt": "x"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found"

    unauth = httpx.post(f"{gw.v1}/completions", json={"prompt": "x"}, timeout=20)
    assert unauth.status_code == 401
    assert unauth.json() == {
        "error": {"message": "Invalid API key", "type": "authentication_error", "code": "invalid_api_key"}
    }
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gw.v1, api_key="sk-wrong", max_retries=0).completions.create(
            model="auto", prompt="x"
        )


def test_every_route_failing_is_the_exhaustion_ladder_in_openais_envelope(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway)
    for p in (a, b):
        sim_control.script(p, {"status": 429, "retry_after": 30}, times=None)

    started = time.monotonic()
    resp = post(gw, {"model": "auto", "prompt": "x", "stream": True})

    assert resp.status_code == 429
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.headers.get("retry-after")
    err = resp.json()["error"]
    assert err["type"] == "rate_limit_error" and isinstance(err.get("retryAtMs"), int)
    assert time.monotonic() - started < 10
    assert CLIENT_KEY not in resp.text
