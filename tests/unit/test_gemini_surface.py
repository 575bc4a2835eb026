"""The Gemini surface as pure translators (spec/surfaces.md §3a).

* request mapping: Gemini ``generateContent`` bodies and the canonical chat body each becomes (system,
  roles, media, function calls/responses and their pairing, tools and schemas, tool config,
  generation config, thinking),
* validation: bad input is one 400 naming the Gemini path,
* model resolution: Gemini names through the family map, never a 404,
* the stream renderer: golden fixtures (``tests/golden/gemini_surface/*.json``) — canonical chunk
  batches in, the exact bytes out, in both framings (SSE and the streamed JSON array),
* the non-stream body, ``:countTokens`` and the error envelope.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from freellm.engine.context import TurnOutcome
from freellm.engine.pump import PumpResult, ToolCall
from freellm.errors import ClientError, Exhausted
from freellm.routing.catalog import Catalog
from freellm.surfaces.gemini_wire.mapping import (
    classify_family,
    count_tokens,
    include_thoughts,
    json_schema,
    resolve_model,
    thinking_effort,
    to_chat_body,
    to_chat_request,
)
from freellm.surfaces.gemini_wire.render import (
    GeminiStreamRenderer,
    finish_reason,
    function_args,
    gemini_error_body,
    generate_content_body,
    status_for,
    usage_metadata,
)
from freellm.surfaces.gemini_wire.wire import (
    ThinkingConfig,
    parse_count_tokens_request,
    parse_generate_request,
)
from tests.unit.helpers import surface_catalog

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "gemini_surface"
HI = {"role": "user", "parts": [{"text": "hi"}]}
USER_HI = {"role": "user", "content": "hi"}


def chat(body: dict[str, Any], model: str = "auto", *, stream: bool = False) -> dict[str, Any]:
    """Gemini body → canonical chat body (no default max_tokens, to keep the table short)."""
    return to_chat_body(parse_generate_request(body), model, stream=stream, default_max_tokens=None)


def reject(body: object) -> ClientError:
    with pytest.raises(ClientError) as info:
        to_chat_request(parse_generate_request(body), "auto", stream=False)
    err = info.value
    assert err.status == 400 and err.type == "invalid_request_error"
    assert err.message.startswith("Invalid request: ")
    return err


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ---- request mapping table -------------------------------------------------------------------------

MAPPING: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "minimal": (
        {"contents": [HI]},
        {"messages": [USER_HI], "stream": False},
    ),
    "no role is user; parts joined with a newline": (
        {"contents": [{"parts": [{"text": "line one"}, {"text": "line two"}]}]},
        {"messages": [{"role": "user", "content": "line one\nline two"}]},
    ),
    "systemInstruction content and roles": (
        {
            "systemInstruction": {"role": "system", "parts": [{"text": "Be brief."}, {"text": "Be kind."}]},
            "contents": [
                HI,
                {"role": "model", "parts": [{"text": "Hel"}, {"text": "lo!"}]},
                {"role": "user", "parts": [{"text": "again"}]},
            ],
        },
        {
            "messages": [
                {"role": "system", "content": "Be brief.\nBe kind."},
                USER_HI,
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "again"},
            ]
        },
    ),
    "systemInstruction as a string, snake_case field names": (
        {"system_instruction": "Be brief.", "contents": [HI], "generation_config": {"max_output_tokens": 99}},
        {"messages": [{"role": "system", "content": "Be brief."}, USER_HI], "max_tokens": 99},
    ),
    "thought parts are skipped; a model turn of only thoughts is dropped": (
        {
            "contents": [
                HI,
                {
                    "role": "model",
                    "parts": [{"text": "pondering", "thought": True, "thoughtSignature": "c2ln"}],
                },
                {"role": "model", "parts": [{"text": "plan", "thought": True}, {"text": "Answer."}]},
            ]
        },
        {"messages": [USER_HI, {"role": "assistant", "content": "Answer."}]},
    ),
    "inlineData image and text in the client's order": (
        {
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": "What is this?"},
                        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                        {"inline_data": {"mime_type": "IMAGE/JPEG", "data": "/9j/4AAQ"}},
                    ],
                }
            ]
        },
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
                    ],
                }
            ]
        },
    ),
    "text inlineData is decoded and inlined": (
        {
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"text": "Summarise:"},
                        {"inlineData": {"mimeType": "text/plain", "data": b64("héllo file")}},
                    ],
                }
            ]
        },
        {"messages": [{"role": "user", "content": "Summarise:\nhéllo file"}]},
    ),
    "fileData with an https URI is an image URL": (
        {
            "contents": [
                {
                    "role": "user",
                    "parts": [
                        {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/cat.png"}},
                        {"text": "Describe."},
                    ],
                }
            ]
        },
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                        {"type": "text", "text": "Describe."},
                    ],
                }
            ]
        },
    ),
    "function call round trip: ids, thoughtSignature, responses before the user text": (
        {
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
                {
                    "role": "model",
                    "parts": [
                        {"text": "Checking."},
                        {
                            "functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}},
                            "thoughtSignature": "c2lnLTE=",
                        },
                        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"text": "Thanks."},
                        {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}},
                        {"functionResponse": {"id": "fc_1", "name": "get_weather", "response": {"temp": 20}}},
                    ],
                },
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        {
                            "id": "fc_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                            "thought_signature": "c2lnLTE=",
                        },
                        {
                            "id": "call_1_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        },
                    ],
                },
                # No id: the oldest call of that name still unanswered — fc_1 is claimed by the response
                # that names it, so this one pairs with the second call.
                {"role": "tool", "tool_call_id": "call_1_1", "name": "get_weather", "content": "sunny"},
                {"role": "tool", "tool_call_id": "fc_1", "name": "get_weather", "content": '{"temp":20}'},
                {"role": "user", "content": "Thanks."},
            ]
        },
    ),
    "function responses paired FIFO by name; unknown → call_<n>; error unwrapped": (
        {
            "contents": [
                HI,
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "a", "args": {}}},
                        {"functionCall": {"name": "b"}},
                        {"functionCall": {"name": "a", "args": [1, 2]}},
                    ],
                },
                {
                    "role": "function",
                    "parts": [
                        {"functionResponse": {"name": "b", "response": {"result": "B"}}},
                        {"functionResponse": {"name": "a", "response": {"error": "boom"}}},
                        {"functionResponse": {"name": "a", "response": {"content": "A2"}}},
                        {"functionResponse": {"name": "zzz", "response": {"x": 1}}},
                    ],
                },
            ]
        },
        {
            "messages": [
                USER_HI,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1_0", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                        {"id": "call_1_1", "type": "function", "function": {"name": "b", "arguments": "{}"}},
                        {
                            "id": "call_1_2",
                            "type": "function",
                            "function": {"name": "a", "arguments": '{"value":[1,2]}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1_1", "name": "b", "content": "B"},
                {"role": "tool", "tool_call_id": "call_1_0", "name": "a", "content": "Error: boom"},
                {"role": "tool", "tool_call_id": "call_1_2", "name": "a", "content": "A2"},
                {"role": "tool", "tool_call_id": "call_0", "name": "zzz", "content": '{"x":1}'},
            ]
        },
    ),
    "tools: Gemini Schema normalised, JSON schema kept, other tools dropped, mode AUTO": (
        {
            "contents": [HI],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": "get_weather",
                            "description": "Weather for a city",
                            "parameters": {
                                "type": "OBJECT",
                                "properties": {
                                    "city": {"type": "STRING", "description": "City", "nullable": True},
                                    "days": {"type": "INTEGER", "format": "int32", "enum": ["A", "B"]},
                                    "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "max_items": 3},
                                    "type": {"type": "STRING"},
                                },
                                "required": ["city"],
                                "propertyOrdering": ["city", "days"],
                            },
                        },
                        {
                            "name": "search",
                            "parametersJsonSchema": {
                                "type": "object",
                                "properties": {"q": {"type": "string"}},
                                "additionalProperties": False,
                            },
                        },
                        {"name": "noop"},
                    ]
                },
                {"googleSearch": {}},
                {"codeExecution": {}},
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        },
        {
            "messages": [USER_HI],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather for a city",
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "city": {"type": ["string", "null"], "description": "City"},
                                "days": {"type": "integer", "format": "int32", "enum": ["A", "B"]},
                                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                                "type": {"type": "string"},
                            },
                            "required": ["city"],
                        },
                    },
                },
                {
                    "type": "function",
                    "function": {
                        "name": "search",
                        "parameters": {
                            "type": "object",
                            "properties": {"q": {"type": "string"}},
                            "additionalProperties": False,
                        },
                    },
                },
                {
                    "type": "function",
                    "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}},
                },
            ],
            "tool_choice": "auto",
        },
    ),
    "tool config ANY with one allowed name → that function": (
        {
            "contents": [HI],
            "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["b"]}},
        },
        {"tool_choice": {"type": "function", "function": {"name": "b"}}},
    ),
    "tool config ANY with several names → required; NONE → none": (
        {
            "contents": [HI],
            "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "any", "allowedFunctionNames": ["a", "b"]}},
        },
        {"tool_choice": "required"},
    ),
    "generation config forwarded": (
        {
            "contents": [HI],
            "generationConfig": {
                "temperature": 0.3,
                "topP": 0.9,
                "topK": 40.0,
                "maxOutputTokens": 256,
                "stopSequences": ["a", "", "b", "c", "d", "e"],
                "candidateCount": 1,
                "seed": 7,
                "presencePenalty": 0.5,
                "frequencyPenalty": -0.5,
                "responseMimeType": "text/plain",
                "responseModalities": ["TEXT"],
            },
        },
        {
            "temperature": 0.3,
            "top_p": 0.9,
            "top_k": 40,
            "max_tokens": 256,
            "stop": ["a", "b", "c", "d"],
            "seed": 7,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5,
        },
    ),
    "responseSchema (Gemini Schema) → json_schema": (
        {
            "contents": [HI],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": {
                    "type": "OBJECT",
                    "properties": {"name": {"type": "STRING"}, "age": {"type": "INTEGER"}},
                    "required": ["name"],
                },
            },
        },
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "gemini_response",
                    "schema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                        "required": ["name"],
                    },
                },
            }
        },
    ),
    "responseJsonSchema → json_schema as is": (
        {
            "contents": [HI],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": {"type": "array", "items": {"$ref": "#/$defs/x"}, "$defs": {"x": {}}},
            },
        },
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "gemini_response",
                    "schema": {"type": "array", "items": {"$ref": "#/$defs/x"}, "$defs": {"x": {}}},
                },
            }
        },
    ),
    "JSON mime type without a schema → json_object": (
        {"contents": [HI], "generationConfig": {"responseMimeType": "application/json"}},
        {"response_format": {"type": "json_object"}},
    ),
    "thinking budget and includeThoughts": (
        {
            "contents": [HI],
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True}},
        },
        {"reasoning_effort": "medium"},
    ),
    "thinking level": (
        {"contents": [HI], "generationConfig": {"thinkingConfig": {"thinkingLevel": "LOW"}}},
        {"reasoning_effort": "low"},
    ),
    "unknown fields and part kinds are accepted and ignored": (
        {
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}, {"executableCode": {"code": "1"}}, {}]},
            ],
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
            "cachedContent": "cachedContents/x",
            "labels": {"a": "b"},
        },
        {"messages": [USER_HI]},
    ),
}


@pytest.mark.parametrize("name", list(MAPPING))
def test_request_mapping(name: str) -> None:
    body, expected = MAPPING[name]
    out = chat(body)
    for key, value in expected.items():
        assert out.get(key) == value, key
    to_chat_request(parse_generate_request(body), "auto", stream=False)  # and the canonical parser accepts it


def test_stream_asks_for_usage_and_default_max_tokens_applies() -> None:
    body = to_chat_body(parse_generate_request({"contents": [HI]}), "m", stream=True)
    assert body == {
        "model": "m",
        "messages": [USER_HI],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 8192,
    }
    with_max = to_chat_body(
        parse_generate_request(
            {"contents": [HI], "generationConfig": {"maxOutputTokens": 0, "temperature": 1}}
        ),
        "m",
        stream=False,
        default_max_tokens=500,
    )
    assert with_max["max_tokens"] == 500 and with_max["temperature"] == 1


def test_tool_choice_none_turns_tools_off_in_the_canonical_request() -> None:
    body = {
        "contents": [HI],
        "tools": [{"functionDeclarations": [{"name": "a"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
    }
    req = to_chat_request(parse_generate_request(body), "auto", stream=False)
    assert req.tool_choice == "none" and not req.wants_tools


@pytest.mark.parametrize(
    ("config", "effort"),
    [
        (None, None),
        ({"thinkingBudget": -1}, None),
        ({"thinkingBudget": 0}, "none"),
        ({"thinkingBudget": 1024}, "low"),
        ({"thinkingBudget": 4095}, "low"),
        ({"thinkingBudget": 4096}, "medium"),
        ({"thinkingBudget": 16383}, "medium"),
        ({"thinkingBudget": 16384}, "high"),
        ({"thinkingLevel": "minimal"}, "minimal"),
        ({"thinkingLevel": "MEDIUM"}, "medium"),
        ({"thinkingLevel": "high", "thinkingBudget": 0}, "high"),
        ({"thinkingLevel": "THINKING_LEVEL_UNSPECIFIED"}, None),
        ({"includeThoughts": True}, None),
    ],
)
def test_thinking_effort(config: dict[str, Any] | None, effort: str | None) -> None:
    tc = ThinkingConfig.model_validate(config) if config is not None else None
    assert thinking_effort(tc) == effort


def test_include_thoughts() -> None:
    assert not include_thoughts(parse_generate_request({"contents": [HI]}))
    assert not include_thoughts(
        parse_generate_request(
            {"contents": [HI], "generationConfig": {"thinkingConfig": {"thinkingBudget": 5}}}
        )
    )
    assert include_thoughts(
        parse_generate_request(
            {"contents": [HI], "generation_config": {"thinking_config": {"include_thoughts": True}}}
        )
    )


def test_json_schema_normaliser_keeps_property_names_and_literals() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "any_of": {"type": "STRING", "enum": ["OBJECT", "x_y"]},
            "nested_obj": {"type": "OBJECT"},
        },
        "any_of": [{"type": "STRING"}, {"type": "NUMBER"}],
        "nullable": True,
        "default": {"some_key": "STRING"},
        "example": {"type": "OBJECT"},
    }
    assert json_schema(schema, gemini=True) == {
        "type": ["object", "null"],
        "properties": {
            "any_of": {"type": "string", "enum": ["OBJECT", "x_y"]},
            "nested_obj": {"type": "object"},
        },
        "anyOf": [{"type": "string"}, {"type": "number"}],
        "default": {"some_key": "STRING"},
        "example": {"type": "OBJECT"},
    }
    assert json_schema({"anyOf": [{"type": "STRING"}], "nullable": True}, gemini=True) == {
        "anyOf": [{"type": "string"}, {"type": "null"}]
    }
    # A JSON Schema (parametersJsonSchema) keeps its keywords; only type names are lower-cased.
    assert json_schema({"type": "OBJECT", "nullable": True, "min_x": 1}, gemini=False) == {
        "type": "object",
        "nullable": True,
        "min_x": 1,
    }


# ---- validation ------------------------------------------------------------------------------------

BAD: dict[str, tuple[object, str]] = {
    "not an object": ([1, 2], "body: Input should be a JSON object"),
    "no contents": ({}, "contents: Field required"),
    "empty contents": ({"contents": []}, "contents: Array should have at least 1 item"),
    "contents not a list": ({"contents": "hi"}, "contents: Input should be an array"),
    "part text not a string": (
        {"contents": [{"role": "user", "parts": [{"text": 5}]}]},
        "contents.0.parts.0.text: Input should be a string",
    ),
    "inlineData without data": (
        {"contents": [{"parts": [{"inlineData": {"mimeType": "image/png"}}]}]},
        "contents.0.parts.0.inlineData.data: Field required",
    ),
    "bad role": ({"contents": [{"role": "robot", "parts": [{"text": "x"}]}]}, "contents.0.role:"),
    "nothing usable": (
        {"contents": [{"role": "user", "parts": [{"text": ""}]}]},
        "contents: at least one content must have",
    ),
    "PDF inlineData": (
        {"contents": [{"parts": [{"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}]}]},
        "contents.0.parts.0.inlineData: mimeType `application/pdf` cannot be forwarded",
    ),
    "text inlineData that is not base64 UTF-8": (
        {"contents": [{"parts": [{"inlineData": {"mimeType": "text/plain", "data": "@@@"}}]}]},
        "contents.0.parts.0.inlineData.data: Input should be base64-encoded UTF-8 text",
    ),
    "Files API fileData": (
        {
            "contents": [
                {
                    "parts": [
                        {
                            "fileData": {
                                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/x",
                                "mimeType": "application/pdf",
                            }
                        }
                    ]
                }
            ]
        },
        "contents.0.parts.0.fileData: mimeType `application/pdf` is not supported",
    ),
    "gs:// fileData": (
        {"contents": [{"parts": [{"fileData": {"fileUri": "gs://bucket/cat.png"}}]}]},
        "contents.0.parts.0.fileData.fileUri: only http(s) image URLs are supported",
    ),
    "candidateCount > 1": (
        {"contents": [HI], "generationConfig": {"candidateCount": 2}},
        "generationConfig.candidateCount: only one candidate is supported",
    ),
    "temperature out of range": (
        {"contents": [HI], "generationConfig": {"temperature": 3}},
        "generationConfig.temperature: Input should be less than or equal to 2",
    ),
    "fractional topK": (
        {"contents": [HI], "generationConfig": {"topK": 2.5}},
        "generationConfig.topK: Input should be a whole number",
    ),
    "bad function calling mode": (
        {"contents": [HI], "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}},
        "toolConfig.functionCallingConfig.mode:",
    ),
    "function declaration without a name": (
        {"contents": [HI], "tools": [{"functionDeclarations": [{"description": "x"}]}]},
        "tools.0.functionDeclarations.0.name: Field required",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_a_400_naming_the_gemini_path(name: str) -> None:
    body, expected = BAD[name]
    err = reject(body)
    assert expected in err.message


def test_bad_input_never_echoes_the_payload() -> None:
    secret = "SECRET-PAYLOAD-123"
    err = reject({"contents": [{"parts": [{"inlineData": {"mimeType": "application/pdf", "data": secret}}]}]})
    assert secret not in err.message
    err = reject({"contents": [{"parts": [{"text": {"x": secret}}]}]})
    assert secret not in err.message


def test_count_tokens_request_needs_contents() -> None:
    with pytest.raises(ClientError) as info:
        parse_count_tokens_request({})
    assert info.value.status == 400
    assert parse_count_tokens_request({"generateContentRequest": {"contents": [HI]}}).generate_content_request


# ---- model resolution --------------------------------------------------------------------------------


def catalog(model_map: dict[str, str] | None = None) -> tuple[Catalog, dict[str, str]]:
    return surface_catalog("gemini", model_map)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gemini-2.5-flash-lite", "flash-lite"),
        ("gemini-2.0-flash-lite-001", "flash-lite"),
        ("gemini-2.5-flash", "flash"),
        ("Gemini-Flash-Latest", "flash"),
        ("gemini-2.5-pro-preview-06-05", "pro"),
        ("gemini-3-pro-preview", "pro"),
        ("gemini-exp-1206", "default"),
        ("", "default"),
        ("auto", "default"),
    ],
)
def test_classify_family(name: str, family: str) -> None:
    assert classify_family(name, catalog()[1]) == family


@pytest.mark.parametrize(
    ("requested", "routed"),
    [
        ("gemini-2.5-pro", "big-model"),
        ("models/gemini-2.5-pro", "big-model"),
        ("gemini-2.5-flash", "alpha/model-x"),
        ("gemini-2.5-flash-lite", "auto"),  # the map points to a disabled model → auto
        ("gemini-exp", "auto"),  # default family
        ("model-x", "model-x"),  # a configured group is used as is
        ("models/model-x", "model-x"),
        ("alpha/big-model", "alpha/big-model"),  # so is a route
        ("alpha:big-model", "alpha:big-model"),
        ("auto", "auto"),
        ("off-model", "auto"),  # disabled → not routable → default family
        ("gpt-4o", "auto"),  # unknown, not Gemini: never a 404
        (None, "auto"),
    ],
)
def test_resolve_model_never_404(requested: str | None, routed: str) -> None:
    cat, model_map = catalog(
        {"pro": "big-model", "flash": "alpha/model-x", "flash-lite": "off-model", "default": "auto"}
    )
    assert resolve_model(requested, cat, model_map) == routed


def test_default_model_map_is_auto() -> None:
    cat, model_map = catalog()
    assert model_map == {"flash-lite": "auto", "flash": "auto", "pro": "auto", "default": "auto"}
    assert resolve_model("gemini-2.5-pro", cat, model_map) == "auto"


# ---- stream renderer: golden fixtures --------------------------------------------------------------

GOLDEN_CASES = sorted(p.stem for p in GOLDEN.glob("*.json"))


def expected_sse(frames: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames)


def expected_json_array(frames: list[dict[str, Any]]) -> bytes:
    return b"[" + b",\n".join(orjson.dumps(f) for f in frames) + b"\n]"


def test_golden_fixtures_cover_the_required_cases() -> None:
    assert {"text", "reasoning_text", "tool_calls_only", "text_then_tool_calls", "error_after_commit"} <= set(
        GOLDEN_CASES
    )


def run_fixture(fx: dict[str, Any], *, sse: bool) -> tuple[GeminiStreamRenderer, bytes]:
    renderer = GeminiStreamRenderer(
        sse=sse,
        model_version=fx["model_version"],
        response_id=fx["response_id"],
        include_thoughts=fx["include_thoughts"],
        prompt_estimate=fx["prompt_estimate"],
    )
    out = b"".join(renderer.chunks(copy.deepcopy(batch)) for batch in fx["batches"])
    end = fx["end"]
    if end == "done":
        out += renderer.done()
    else:
        out += renderer.stream_error(end["stream_error"]["provider"], end["stream_error"]["message"])
    return renderer, out


@pytest.mark.parametrize("name", GOLDEN_CASES)
@pytest.mark.parametrize("sse", [True, False], ids=["sse", "json-array"])
def test_stream_renderer_golden(name: str, sse: bool) -> None:
    fx = json.loads((GOLDEN / f"{name}.json").read_text())
    renderer, out = run_fixture(fx, sse=sse)
    frames = fx["frames"]
    if sse:
        assert renderer.content_type == "text/event-stream"
        assert out == expected_sse(frames)
    else:
        assert renderer.content_type == "application/json"
        assert out == expected_json_array(frames)
        assert json.loads(out) == frames  # the whole body is one valid JSON array
    check_stream_grammar(frames, errored=fx["end"] != "done")
    # Nothing more once the stream has ended (a shutdown may still call done()).
    assert renderer.done() == b"" and renderer.chunks(copy.deepcopy(fx["batches"][0])) == b""


def check_stream_grammar(frames: list[dict[str, Any]], *, errored: bool) -> None:
    """Invariants Gemini clients rely on, independent of the fixture's content."""
    body = frames[:-1] if errored else frames
    response_ids = {f["responseId"] for f in body}
    assert len(response_ids) == 1
    for f in body:
        (cand,) = f["candidates"]
        assert cand["index"] == 0 and cand["content"]["role"] == "model"
    if errored:
        err = frames[-1]["error"]
        assert err["code"] == 502 and err["status"] == "UNAVAILABLE" and err["message"]
        assert all("finishReason" not in f["candidates"][0] for f in body)
        return
    # The last chunk (and only it) carries finishReason and usageMetadata; every other chunk has parts.
    assert "finishReason" in frames[-1]["candidates"][0] and "usageMetadata" in frames[-1]
    for f in frames[:-1]:
        assert "finishReason" not in f["candidates"][0] and "usageMetadata" not in f
        assert f["candidates"][0]["content"]["parts"]
    for f in frames:
        for part in f["candidates"][0]["content"]["parts"]:
            if "functionCall" in part:
                assert isinstance(part["functionCall"]["args"], dict) and part["functionCall"]["id"]


def test_json_array_framing_literally() -> None:
    r = GeminiStreamRenderer(
        sse=False, model_version="m", response_id="r", include_thoughts=False, prompt_estimate=1
    )
    chunk = {
        "id": "c",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
    }
    first = r.chunks([chunk])
    assert (
        first
        == b'[{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"index":0}],"modelVersion":"m","responseId":"r"}'
    )
    end = r.done()
    assert end.startswith(
        b',\n{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP","index":0}]'
    )
    assert end.endswith(b'"modelVersion":"m","responseId":"r"}\n]')


def test_error_before_any_element_is_still_a_valid_array() -> None:
    r = GeminiStreamRenderer(
        sse=False, model_version="m", response_id="r", include_thoughts=False, prompt_estimate=1
    )
    out = r.stream_error("freellm", "The gateway is shutting down; retry the request.")
    assert json.loads(out) == [
        {
            "error": {
                "code": 502,
                "message": "Provider error (freellm): stream interrupted: The gateway is shutting down; retry the request.",
                "status": "UNAVAILABLE",
            }
        }
    ]
    assert r.done() == b""


def test_renderer_generates_call_ids_when_upstream_gave_none() -> None:
    r = GeminiStreamRenderer(
        sse=True, model_version="m", response_id="r", include_thoughts=False, prompt_estimate=1
    )
    calls = [
        {"index": 0, "id": "call_stream_0", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"index": 1, "id": "call_stream_1", "type": "function", "function": {"name": "b", "arguments": "{}"}},
        {
            "index": 2,
            "id": "call_x",
            "type": "function",
            "function": {"name": "c", "arguments": "{}"},
            "thought_signature": "sig",
        },
    ]
    out = r.chunks(
        [{"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": calls}, "finish_reason": None}]}]
    )
    parts = json.loads(out[len(b"data: ") :])["candidates"][0]["content"]["parts"]
    ids = [p["functionCall"]["id"] for p in parts]
    assert ids[0].startswith("call_") and ids[0].endswith("_0") and ids[1].endswith("_1") and ids[0] != ids[1]
    assert "stream" not in ids[0] and ids[2] == "call_x"
    assert parts[2]["thoughtSignature"] == "sig" and "thoughtSignature" not in parts[0]


# ---- non-stream body ---------------------------------------------------------------------------------


def outcome(result: PumpResult, tokens_out: int = 7, model: str = "model-x") -> TurnOutcome:
    attempt: Any = SimpleNamespace(route=SimpleNamespace(model=model))
    return TurnOutcome(attempt=attempt, result=result, ttfb_ms=None, tokens_out=tokens_out)


def test_generate_content_body_thoughts_text_function_calls() -> None:
    result = PumpResult(
        text="Let me look.",
        reasoning="plan",
        tool_calls=[ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')],
        finish_reason="tool_calls",
        usage={"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
    )
    body = generate_content_body(outcome(result), response_id="rid", include_thoughts=True, prompt_estimate=5)
    assert body == {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "plan", "thought": True},
                        {"text": "Let me look."},
                        {"functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}},
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 12, "totalTokenCount": 42},
        "modelVersion": "model-x",
        "responseId": "rid",
    }
    hidden = generate_content_body(
        outcome(result), response_id="rid", include_thoughts=False, prompt_estimate=5
    )
    assert {"text": "plan", "thought": True} not in hidden["candidates"][0]["content"]["parts"]


def test_generate_content_body_estimates_usage_and_maps_length() -> None:
    result = PumpResult(text="cut", finish_reason="length")
    body = generate_content_body(
        outcome(result, tokens_out=3), response_id="r", include_thoughts=False, prompt_estimate=9
    )
    assert body["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert body["usageMetadata"] == {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12}


@pytest.mark.parametrize(
    ("finish", "tools", "reason"),
    [
        ("stop", False, "STOP"),
        (None, False, "STOP"),
        ("tool_calls", True, "STOP"),
        ("length", True, "STOP"),
        ("length", False, "MAX_TOKENS"),
        ("content_filter", False, "SAFETY"),
        ("weird", False, "STOP"),
    ],
)
def test_finish_reason(finish: str | None, tools: bool, reason: str) -> None:
    assert finish_reason(finish, tools) == reason


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ('"{\\"a\\": 1}"', {"a": 1}),
        ("[1, 2]", {"value": [1, 2]}),
        ("42", {"value": 42}),
        ("not json", {"value": "not json"}),
    ],
)
def test_function_args(args: str, expected: dict[str, Any]) -> None:
    assert function_args(args) == expected


def test_usage_metadata_reasoning_and_cache() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 50,
        "total_tokens": 150,
        "completion_tokens_details": {"reasoning_tokens": 20},
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    assert usage_metadata(usage, prompt_estimate=1, output_estimate=1) == {
        "promptTokenCount": 100,
        "candidatesTokenCount": 30,
        "totalTokenCount": 150,
        "thoughtsTokenCount": 20,
        "cachedContentTokenCount": 64,
    }
    assert usage_metadata(None, prompt_estimate=4, output_estimate=2) == {
        "promptTokenCount": 4,
        "candidatesTokenCount": 2,
        "totalTokenCount": 6,
    }


# ---- countTokens -------------------------------------------------------------------------------------


def test_count_tokens_estimate() -> None:
    req = parse_generate_request(
        {
            "systemInstruction": {"parts": [{"text": "x" * 8}]},  # 2
            "contents": [
                {
                    "role": "user",
                    "parts": [{"text": "y" * 9}, {"inlineData": {"mimeType": "image/png", "data": "AA=="}}],
                },  # 3 + 258
                {
                    "role": "model",
                    "parts": [
                        {"text": "ignored thought", "thought": True},
                        {"functionCall": {"name": "f", "args": {}}},
                    ],
                },
                {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"ok": True}}}]},
            ],
            "tools": [{"functionDeclarations": [{"name": "f"}]}],
        }
    )
    call = len(orjson.dumps({"name": "f", "args": {}}))
    response = len(orjson.dumps({"name": "f", "response": {"ok": True}}))
    tools = len(orjson.dumps([{"name": "f"}]))
    expected = 2 + 3 + 258 + (call + 3) // 4 + (response + 3) // 4 + (tools + 3) // 4
    assert count_tokens(req.contents, req) == expected
    assert count_tokens(req.contents) == expected - 2 - (tools + 3) // 4


# ---- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (400, "INVALID_ARGUMENT"),
        (401, "UNAUTHENTICATED"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
        (413, "INVALID_ARGUMENT"),
        (429, "RESOURCE_EXHAUSTED"),
        (500, "INTERNAL"),
        (502, "UNAVAILABLE"),
        (503, "UNAVAILABLE"),
        (504, "DEADLINE_EXCEEDED"),
        (418, "INVALID_ARGUMENT"),
        (599, "INTERNAL"),
    ],
)
def test_status_for(status: int, name: str) -> None:
    assert status_for(status) == name


def test_error_envelope_client_error() -> None:
    body = gemini_error_body(ClientError(400, "Invalid request: contents: Field required"))
    assert body == {
        "error": {
            "code": 400,
            "message": "Invalid request: contents: Field required",
            "status": "INVALID_ARGUMENT",
        }
    }
    limited = gemini_error_body(
        ClientError(
            429,
            "slow down",
            type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": "7"},
        )
    )
    assert limited["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert limited["error"]["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "RATE_LIMIT_EXCEEDED",
            "domain": "freellm",
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"},
    ]


def test_error_envelope_exhausted_with_retry_info() -> None:
    retry_at = int(time.time() * 1000) + 30_000
    exc = Exhausted(
        429, "rate_limit_error", "rate_limit_exceeded", "All models rate-limited", retry_at_ms=retry_at
    )
    err = gemini_error_body(exc)["error"]
    assert (
        err["code"] == 429
        and err["status"] == "RESOURCE_EXHAUSTED"
        and err["message"] == "All models rate-limited"
    )
    info, retry = err["details"]
    assert info == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "RATE_LIMIT_EXCEEDED",
        "domain": "freellm",
        "metadata": {"retryAtMs": str(retry_at)},
    }
    assert retry["@type"] == "type.googleapis.com/google.rpc.RetryInfo"
    assert retry["retryDelay"] in ("30s", "31s", "29s")
    failed = gemini_error_body(Exhausted(502, "provider_error", "upstream_failed", "All failed"))["error"]
    assert failed["status"] == "UNAVAILABLE" and failed["details"][0]["reason"] == "UPSTREAM_FAILED"
