"""Over the wire: the Gemini surface with the official ``google-genai`` SDK (under ``/v1``, its default
API version) and plain HTTP (under ``/v1beta``, as Gemini CLI calls it) against a real gateway in front
of the simulator.

Each test starts a fresh gateway with its own provider names, scripts the simulator, drives the gateway
as a Gemini client would, and checks both what the client saw and the translated OpenAI body the
simulator received. Raw frames are read with plain HTTP where the SDK would hide them (the two stream
framings, the in-band error element, the error envelope).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from pydantic import BaseModel

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import MakeGateway, one_route, received, two_routes

MODEL = "model-x"
KEY = {"x-goog-api-key": CLIENT_KEY}
HELLO = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}


def client(gw: GatewayServer, *, api_version: str = "v1") -> genai.Client:
    return genai.Client(
        api_key=CLIENT_KEY,
        http_options=types.HttpOptions(base_url=gw.base_url, api_version=api_version, timeout=15_000),
    )


def headers_of(response: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in response.sdk_http_response.headers.items()}


@dataclass
class Raw:
    status: int
    headers: httpx.Headers
    body: bytes = b""
    frames: list[dict[str, Any]] = field(default_factory=list)
    """SSE ``data:`` payloads, or the elements of the streamed JSON array, decoded."""
    other_lines: list[str] = field(default_factory=list)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return "".join(
            p.get("text", "")
            for f in self.frames
            if "candidates" in f
            for p in f["candidates"][0]["content"]["parts"]
            if not p.get("thought")
        )


def post(
    gw: GatewayServer,
    path: str,
    payload: Any,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
) -> Raw:
    """POST and read the whole answer; SSE bodies are split into their ``data:`` frames, a streamed JSON
    array into its elements."""
    kwargs: dict[str, Any] = {"content": payload} if isinstance(payload, (bytes, str)) else {"json": payload}
    with (
        httpx.Client(timeout=15.0) as h,
        h.stream(
            "POST",
            f"{gw.base_url}{path}",
            headers=KEY if headers is None else headers,
            params=params,
            **kwargs,
        ) as resp,
    ):
        out = Raw(status=resp.status_code, headers=resp.headers)
        if resp.headers.get("content-type", "").startswith("text/event-stream"):
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    out.frames.append(json.loads(line[len("data: ") :]))
                elif line.strip():
                    out.other_lines.append(line)
            return out
        out.body = resp.read()
    if out.status == 200 and out.body.startswith(b"["):
        out.frames = json.loads(out.body)
    return out


def assert_gemini_error(body: Any, code: int, status: str) -> dict[str, Any]:
    err: dict[str, Any] = body["error"]
    assert err["code"] == code and err["status"] == status
    assert isinstance(err["message"], str) and err["message"]
    return err


# ---- generate_content ----------------------------------------------------------------------------------


def test_generate_content_translates_the_request(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Bonjour!", "chunks": 2})

    c = client(gw)
    resp = c.models.generate_content(
        model="gemini-2.5-flash",
        contents="Say hi",
        config=types.GenerateContentConfig(
            system_instruction="Answer in French.",
            temperature=0.4,
            top_p=0.9,
            top_k=20,
            max_output_tokens=300,
            stop_sequences=["END"],
            seed=3,
        ),
    )
    assert resp.text == "Bonjour!"
    assert resp.model_version == MODEL
    assert resp.response_id
    cand = resp.candidates[0]  # type: ignore[index]
    assert cand.finish_reason == types.FinishReason.STOP
    usage = resp.usage_metadata
    assert usage is not None and usage.prompt_token_count and usage.candidates_token_count
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count
    assert headers_of(resp)["x-routed-via"] == f"{a}/{MODEL}"

    [body] = received(sim_control, a)
    assert body["messages"] == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Say hi"},
    ]
    assert body["stream"] is False
    assert body["max_tokens"] == 300 and body["temperature"] == 0.4 and body["top_p"] == 0.9
    assert body["top_k"] == 20 and body["stop"] == ["END"] and body["seed"] == 3


def test_default_max_output_tokens(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    c = client(gw)
    c.models.generate_content(model="gemini-2.5-pro", contents="hi")
    [body] = received(sim_control, a)
    assert body["max_tokens"] == 8192


def test_generate_content_stream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "One two three four", "chunks": 4})

    c = client(gw)
    chunks = list(c.models.generate_content_stream(model="gemini-2.5-flash", contents="Count"))
    assert "".join(c.text or "" for c in chunks) == "One two three four"
    assert len(chunks) == 5  # four text chunks and the final one
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    assert last.usage_metadata is not None and last.usage_metadata.total_token_count
    assert all(c.candidates[0].finish_reason is None for c in chunks[:-1])  # type: ignore[index]
    assert {c.response_id for c in chunks} == {chunks[0].response_id}
    [body] = received(sim_control, a)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_thinking_config_and_thought_parts(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    scenario = {"reasoning": "Let me think.", "text": "42.", "chunks": 1}
    sim_control.script(a, scenario, times=3)
    c = client(gw)

    shown = c.models.generate_content(
        model="gemini-2.5-pro",
        contents="Meaning of life?",
        config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(thinking_budget=2048, include_thoughts=True)
        ),
    )
    parts = shown.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert [(p.thought, p.text) for p in parts] == [(True, "Let me think."), (None, "42.")]  # type: ignore[union-attr]
    assert shown.text == "42."

    streamed = list(
        c.models.generate_content_stream(
            model="gemini-2.5-pro",
            contents="Meaning of life?",
            config=types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=True)),
        )
    )
    thoughts = [p.text for ch in streamed for p in ch.candidates[0].content.parts or [] if p.thought]  # type: ignore[index, union-attr]
    assert "".join(t or "" for t in thoughts) == "Let me think."

    hidden = c.models.generate_content(
        model="gemini-2.5-pro",
        contents="Meaning of life?",
        config=types.GenerateContentConfig(
            thinking_config=types.ThinkingConfig(thinking_level=types.ThinkingLevel.LOW)
        ),
    )
    assert [p.thought for p in hidden.candidates[0].content.parts] == [None]  # type: ignore[index, union-attr]
    efforts = [b.get("reasoning_effort") for b in received(sim_control, a)]
    assert efforts == ["low", None, "low"]


# ---- function calling -------------------------------------------------------------------------------------

WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Current weather for a city",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING, description="City name")},
        required=["city"],
    ),
)


@pytest.mark.parametrize("stream", [False, True])
def test_function_calling_round_trip(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(
        a, {"tool_calls": [{"id": "call_up_1", "name": "get_weather", "arguments": {"city": "Paris"}}]}
    )
    sim_control.script(a, {"text": "It is 18C in Paris."})
    c = client(gw)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode.AUTO)
        ),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    question = types.Content(role="user", parts=[types.Part.from_text(text="Weather in Paris?")])

    if stream:
        chunks = list(
            c.models.generate_content_stream(model="gemini-2.5-flash", contents=[question], config=config)
        )
        calls = [fc for ch in chunks for fc in ch.function_calls or []]
        model_turn = types.Content(
            role="model",
            parts=[p for ch in chunks for p in ch.candidates[0].content.parts or []],  # type: ignore[index, union-attr]
        )
        assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    else:
        first = c.models.generate_content(model="gemini-2.5-flash", contents=[question], config=config)
        calls = first.function_calls or []
        model_turn = first.candidates[0].content  # type: ignore[index, assignment]
        assert first.candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    [call] = calls
    assert (call.id, call.name, call.args) == ("call_up_1", "get_weather", {"city": "Paris"})

    answer = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name=call.name, response={"output": "18C, sunny"}
                )
            )
        ],
    )
    second = c.models.generate_content(
        model="gemini-2.5-flash", contents=[question, model_turn, answer], config=config
    )
    assert second.text == "It is 18C in Paris."

    first_body, second_body = received(sim_control, a)
    assert first_body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "description": "City name"}},
                    "required": ["city"],
                },
            },
        }
    ]
    assert first_body["tool_choice"] == "auto"
    assert second_body["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_up_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_up_1", "name": "get_weather", "content": "18C, sunny"},
    ]


def test_function_call_thought_signature_is_forwarded(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    raw = post(
        gw,
        "/v1beta/models/gemini-3-pro-preview:generateContent",
        {
            "contents": [
                {"role": "user", "parts": [{"text": "Weather?"}]},
                {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
                            "thoughtSignature": "c2ln",
                        }
                    ],
                },
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "get_weather", "response": {"t": 20}}}],
                },
            ],
            "tools": [
                {
                    "functionDeclarations": [
                        {"name": "get_weather", "parametersJsonSchema": {"type": "object"}}
                    ]
                }
            ],
        },
    )
    assert raw.status == 200, raw.body
    [body] = received(sim_control, a)
    call = body["messages"][1]["tool_calls"][0]
    assert call["thought_signature"] == "c2ln" and call["id"] == "call_1_0"
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1_0",
        "name": "get_weather",
        "content": '{"t":20}',
    }


# ---- structured output ------------------------------------------------------------------------------------


class Person(BaseModel):
    name: str
    age: int


def test_structured_output_with_response_schema(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": '{"name": "Ada", "age": 36}'}, times=2)
    c = client(gw)

    resp = c.models.generate_content(
        model="gemini-2.5-flash",
        contents="Who wrote the first program?",
        config=types.GenerateContentConfig(response_mime_type="application/json", response_schema=Person),
    )
    assert resp.parsed == Person(name="Ada", age=36)

    schema = types.Schema(
        type=types.Type.OBJECT,
        properties={
            "name": types.Schema(type=types.Type.STRING),
            "age": types.Schema(type=types.Type.INTEGER),
        },
        required=["name", "age"],
    )
    c.models.generate_content(
        model="gemini-2.5-flash",
        contents="Again",
        config=types.GenerateContentConfig(response_mime_type="application/json", response_schema=schema),
    )
    for body in received(sim_control, a):
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "gemini_response"
        sent = fmt["json_schema"]["schema"]
        assert sent["type"] == "object"
        assert (
            sent["properties"]["name"]["type"] == "string" and sent["properties"]["age"]["type"] == "integer"
        )


# ---- countTokens and models ----------------------------------------------------------------------------


def test_count_tokens(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    c = client(gw)
    resp = c.models.count_tokens(model="gemini-2.5-flash", contents="x" * 40)
    assert resp.total_tokens == 10
    raw = post(
        gw,
        "/v1beta/models/gemini-2.5-flash:countTokens",
        {
            "generateContentRequest": {
                "model": "models/gemini-2.5-flash",
                "systemInstruction": {"parts": [{"text": "y" * 8}]},
                "contents": [{"role": "user", "parts": [{"text": "x" * 40}]}],
            }
        },
    )
    assert raw.status == 200 and raw.json == {"totalTokens": 12}
    assert received(sim_control, a) == []  # an estimate: no upstream call


def test_models_get_and_list(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    c = client(gw)
    names = [m.name for m in c.models.list()]
    assert names == [
        "models/auto",
        "models/gemini-2.5-flash-lite",
        "models/gemini-2.5-flash",
        "models/gemini-2.5-pro",
        f"models/{MODEL}",
    ]
    paged = list(c.models.list(config=types.ListModelsConfig(page_size=2)))
    assert [m.name for m in paged] == names  # followed nextPageToken

    model = c.models.get(model=MODEL)
    assert model.name == f"models/{MODEL}"
    assert model.supported_actions == ["generateContent", "streamGenerateContent", "countTokens"]
    assert model.input_token_limit == 128000 and model.output_token_limit == 8192
    flash = c.models.get(model="gemini-2.5-flash")
    assert flash.description and "auto" in flash.description
    assert c.models.get(model="gemini-3-pro-preview").name == "models/gemini-3-pro-preview"
    with pytest.raises(genai_errors.ClientError) as info:
        c.models.get(model="no-such-model")
    assert info.value.code == 404 and info.value.status == "NOT_FOUND"

    with httpx.Client() as h:
        beta = h.get(f"{gw.base_url}/v1beta/models", headers=KEY).json()
        assert [m["name"] for m in beta["models"]] == names and "nextPageToken" not in beta
        one = h.get(f"{gw.base_url}/v1beta/models/auto", params={"key": CLIENT_KEY}).json()
        assert one["name"] == "models/auto"


def test_openai_model_routes_are_unchanged(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    bearer = {"Authorization": f"Bearer {CLIENT_KEY}"}
    with httpx.Client() as h:
        listing = h.get(f"{gw.base_url}/v1/models", headers=bearer).json()
        assert listing["object"] == "list" and listing["data"][0]["id"] == "auto"
        one = h.get(f"{gw.base_url}/v1/models/{MODEL}", headers=bearer).json()
        assert one == {"id": MODEL, "object": "model", "created": 0, "owned_by": "freellm"}
        bad = h.get(f"{gw.base_url}/v1/models", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.json()["error"]["type"] == "authentication_error"
        chat = h.post(
            f"{gw.base_url}/v1/chat/completions",
            json={"model": "auto", "messages": []},
            headers=bearer,
        )
        assert chat.status_code == 400 and chat.json()["error"]["type"] == "invalid_request_error"
        assert "status" not in chat.json()["error"]  # OpenAI's envelope, not Gemini's
        gemini_401 = h.get(f"{gw.base_url}/v1/models", headers={"x-goog-api-key": "nope"})
        assert_gemini_error(gemini_401.json(), 401, "UNAUTHENTICATED")


# ---- raw HTTP under /v1beta ------------------------------------------------------------------------------


def test_v1beta_sse_stream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "abcdef", "chunks": 3})
    raw = post(gw, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", HELLO, params={"alt": "sse"})
    assert raw.status == 200
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert raw.other_lines == []
    assert raw.text == "abcdef"
    assert len(raw.frames) == 4
    last = raw.frames[-1]
    assert last["candidates"][0]["finishReason"] == "STOP" and last["candidates"][0]["content"]["parts"] == []
    assert last["usageMetadata"]["totalTokenCount"] >= 1 and last["modelVersion"] == MODEL
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"


def test_v1beta_stream_without_alt_is_a_json_array(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "abcdef", "chunks": 3})
    raw = post(gw, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", HELLO)
    assert raw.status == 200
    assert raw.headers["content-type"].startswith("application/json")
    assert raw.body.startswith(b"[{") and raw.body.endswith(b"}\n]")
    assert isinstance(raw.json, list) and len(raw.frames) == 4
    assert raw.text == "abcdef"
    assert raw.frames[-1]["candidates"][0]["finishReason"] == "STOP"


def test_v1beta_tool_call_stream_ends_with_finish_reason(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, times=2)
    payload = {
        **HELLO,
        "tools": [{"functionDeclarations": [{"name": "ls", "parameters": {"type": "OBJECT"}}]}],
    }
    for params in ({"alt": "sse"}, None):
        raw = post(gw, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", payload, params=params)
        assert raw.status == 200
        calls = [
            p["functionCall"]
            for f in raw.frames
            for p in f["candidates"][0]["content"]["parts"]
            if "functionCall" in p
        ]
        assert len(calls) == 1 and calls[0]["name"] == "ls" and calls[0]["args"] == {"path": "."}
        assert calls[0]["id"].startswith("call_")
        assert raw.frames[-1]["candidates"][0]["finishReason"] == "STOP"


def test_v1beta_non_stream(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"text": "Hi there", "finish_reason": "length"})
    raw = post(gw, "/v1beta/models/models%2Fgemini-2.5-flash:generateContent", HELLO)
    assert raw.status == 200
    body = raw.json
    assert body["candidates"][0]["content"] == {"role": "model", "parts": [{"text": "Hi there"}]}
    assert body["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert set(body) == {"candidates", "usageMetadata", "modelVersion", "responseId"}


def test_family_map_routes_gemini_names(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    a, b = unique("alpha"), unique("beta")
    gw = make_gateway(
        {a: [MODEL], b: ["big-model"]},
        extra={"surfaces": {"gemini": {"model_map": {"pro": f"{b}/big-model", "flash": MODEL}}}},
    )
    expect = {
        "gemini-2.5-pro": f"{b}/big-model",
        "gemini-2.5-flash": f"{a}/{MODEL}",
        "gemini-2.5-flash-lite": f"{a}/{MODEL}",  # contains "flash"; no flash-lite key → flash
        "gemini-exp-1206": f"{a}/{MODEL}",  # default → auto → the chain's first route
        "big-model": f"{b}/big-model",  # a catalog id is used as is
        "totally-unknown": f"{a}/{MODEL}",
    }
    for name, route in expect.items():
        raw = post(gw, f"/v1beta/models/{name}:generateContent", HELLO)
        assert raw.status == 200, (name, raw.body)
        assert raw.headers["x-routed-via"] == route, name


# ---- failover and in-band errors --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_failure_before_first_token_is_invisible(
    make_gateway: MakeGateway, sim_control: SimControl, stream: bool
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, {"status": 500, "error_message": "upstream exploded"})
    sim_control.script(b, {"reasoning": "hmm", "text": "From the second route.", "chunks": 3})
    c = client(gw)
    if stream:
        chunks = list(c.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
        text = "".join(ch.text or "" for ch in chunks)
        headers = headers_of(chunks[0])
    else:
        resp = c.models.generate_content(model="gemini-2.5-flash", contents="hi")
        text, headers = resp.text or "", headers_of(resp)
    assert text == "From the second route."
    assert headers["x-routed-via"] == f"{b}/{MODEL}"
    assert headers["x-fallback-attempts"] == "1"
    [failed] = sim_control.requests(provider=a)
    assert failed["status"] == 500


CUT = {"text": "Once upon a time there was", "chunks": 5, "cut_after": 2}


@pytest.mark.parametrize("alt", ["sse", None])
def test_failure_after_first_token_is_an_error_element(
    make_gateway: MakeGateway, sim_control: SimControl, alt: str | None
) -> None:
    gw, a, b = two_routes(make_gateway)
    sim_control.script(a, CUT)
    raw = post(
        gw,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        HELLO,
        params={"alt": alt} if alt else None,
    )
    assert raw.status == 200
    if alt is None:
        assert isinstance(raw.json, list)  # still one valid JSON array
    *chunks, last = raw.frames
    assert [p["text"] for f in chunks for p in f["candidates"][0]["content"]["parts"]] == ["Once ", "upon "]
    err = assert_gemini_error(last, 502, "UNAVAILABLE")
    assert a in err["message"] and "stream interrupted" in err["message"]
    assert raw.headers["x-routed-via"] == f"{a}/{MODEL}"
    assert received(sim_control, b) == []  # no failover after the commit point


def test_failure_after_first_token_raises_in_the_sdk(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, _ = two_routes(make_gateway)
    sim_control.script(a, CUT)
    seen: list[str] = []
    c = client(gw)
    with pytest.raises(genai_errors.ServerError) as info:
        for ch in c.models.generate_content_stream(model="gemini-2.5-flash", contents="story"):
            seen.append(ch.text or "")
    assert seen == ["Once ", "upon "]
    assert info.value.code == 502 and info.value.status == "UNAVAILABLE"


def test_exhaustion_keeps_the_ladder_status_with_retry_info(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"status": 429, "retry_after": 30}, times=None)
    c = client(gw)
    with pytest.raises(genai_errors.ClientError) as info:
        c.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert info.value.code == 429 and info.value.status == "RESOURCE_EXHAUSTED"

    raw = post(gw, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", HELLO, params={"alt": "sse"})
    assert raw.status == 429 and int(raw.headers["retry-after"]) >= 1
    err = assert_gemini_error(raw.json, 429, "RESOURCE_EXHAUSTED")
    by_type = {d["@type"]: d for d in err["details"]}
    retry = by_type["type.googleapis.com/google.rpc.RetryInfo"]["retryDelay"]
    assert retry.endswith("s") and 1 <= int(retry[:-1]) <= 31
    assert by_type["type.googleapis.com/google.rpc.ErrorInfo"]["reason"] == "RATE_LIMIT_EXCEEDED"


def test_all_routes_failing_is_unavailable(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = one_route(make_gateway)
    sim_control.script(a, {"status": 500}, times=None)
    raw = post(gw, "/v1/models/gemini-2.5-flash:generateContent", HELLO)
    assert raw.status == 502
    assert_gemini_error(raw.json, 502, "UNAVAILABLE")


# ---- bad input and auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({}, "contents: Field required"),
        ({"contents": []}, "contents: Array should have at least 1 item"),
        ({"contents": [{"role": "user", "parts": [{"text": 42}]}]}, "contents.0.parts.0.text"),
        (
            {"contents": [{"parts": [{"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}]}]},
            "application/pdf",
        ),
        ({"contents": [{"parts": [{"fileData": {"fileUri": "gs://b/x.png"}}]}]}, "fileData.fileUri"),
        ({**HELLO, "generationConfig": {"candidateCount": 3}}, "candidateCount"),
        ({**HELLO, "generationConfig": {"temperature": "hot"}}, "generationConfig.temperature"),
        (b"{not json", "Malformed JSON"),
        (b"", "empty"),
        ([1, 2, 3], "body: Input should be a JSON object"),
    ],
)
@pytest.mark.parametrize("base", ["/v1beta", "/v1"])
def test_bad_input_is_400_in_gemini_envelope(
    make_gateway: MakeGateway, sim_control: SimControl, payload: Any, needle: str, base: str
) -> None:
    gw, a = one_route(make_gateway)
    raw = post(gw, f"{base}/models/gemini-2.5-flash:streamGenerateContent", payload, params={"alt": "sse"})
    assert raw.status == 400
    err = assert_gemini_error(raw.json, 400, "INVALID_ARGUMENT")
    assert needle in err["message"]
    assert received(sim_control, a) == []  # refused before routing


def test_bad_input_through_the_sdk(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    c = client(gw)
    with pytest.raises(genai_errors.ClientError) as info:
        c.models.generate_content(
            model="gemini-2.5-flash",
            contents=types.Part.from_uri(file_uri="gs://bucket/doc.pdf", mime_type="application/pdf"),
        )
    assert info.value.code == 400 and info.value.status == "INVALID_ARGUMENT"


def test_unknown_action_and_wrong_method(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    raw = post(gw, "/v1beta/models/gemini-2.5-flash:predict", HELLO)
    assert raw.status == 404
    assert "predict" in assert_gemini_error(raw.json, 404, "NOT_FOUND")["message"]
    # embedding actions exist, but a chat model is no embedding model (none is configured here)
    raw = post(gw, "/v1beta/models/gemini-2.5-flash:embedContent", {"content": {"parts": [{"text": "x"}]}})
    assert "embedding model" in assert_gemini_error(raw.json, 404, "NOT_FOUND")["message"]
    with httpx.Client() as h:
        resp = h.put(f"{gw.base_url}/v1beta/models/gemini-2.5-flash:generateContent", headers=KEY, json=HELLO)
    assert resp.status_code == 405
    assert resp.json()["error"]["code"] == 405


@pytest.mark.parametrize("base", ["/v1beta", "/v1"])
def test_keys(make_gateway: MakeGateway, base: str) -> None:
    gw, _ = one_route(make_gateway)
    path = f"{base}/models/gemini-2.5-flash:generateContent"
    assert post(gw, path, HELLO).status == 200  # x-goog-api-key
    assert post(gw, path, HELLO, headers={}, params={"key": CLIENT_KEY}).status == 200
    assert post(gw, path, HELLO, headers={"Authorization": f"Bearer {CLIENT_KEY}"}).status == 200
    for headers, params in (({"x-goog-api-key": "wrong"}, None), ({}, {"key": "wrong"}), ({}, None)):
        raw = post(gw, path, HELLO, headers=headers, params=params)
        assert raw.status == 401
        assert_gemini_error(raw.json, 401, "UNAUTHENTICATED")


def test_query_key_only_on_gemini_paths(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    with httpx.Client() as h:
        resp = h.post(
            f"{gw.base_url}/v1/chat/completions",
            params={"key": CLIENT_KEY},
            json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert resp.status_code == 401
    assert resp.json()["error"]["type"] == "authentication_error"


def test_sdk_with_wrong_key(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    bad = genai.Client(
        api_key="wrong", http_options=types.HttpOptions(base_url=gw.base_url, api_version="v1")
    )
    with pytest.raises(genai_errors.ClientError) as info:
        bad.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert info.value.code == 401 and info.value.status == "UNAUTHENTICATED"
    with pytest.raises(genai_errors.ClientError) as listing:
        list(bad.models.list())
    assert listing.value.code == 401 and listing.value.status == "UNAUTHENTICATED"
