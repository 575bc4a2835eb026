"""The Anthropic Messages surface as pure translators (spec/surfaces.md §2).

* request mapping: a table of Anthropic bodies and the canonical chat body each becomes; prompt-caching
  markers (``cache_control``) on parts, with a golden baseline proving unmarked requests map exactly as
  before (``tests/golden/anthropic_requests/``), and how marked parts reach each upstream kind,
* validation: bad input is one 400 naming the Anthropic path,
* model resolution: Claude names through the family map, never a 404,
* the stream renderer: golden fixtures (``tests/golden/anthropic/*.json``) — canonical chunk batches in,
  the exact SSE bytes out,
* the non-stream ``message`` body and the error envelope.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from freellm.engine.context import Attempt, TurnOutcome
from freellm.engine.pump import PumpResult, ToolCall
from freellm.errors import ClientError, Exhausted
from freellm.providers.anthropic_wire.request import to_messages_request
from freellm.providers.gemini_wire.request import to_gemini_request
from freellm.providers.openai_compat import accepts_cache_control, without_cache_control
from freellm.routing.catalog import Catalog
from freellm.sim.anthropic_wire import ANTHROPIC_WIRE
from freellm.sim.openai_wire import OPENAI_WIRE
from freellm.surfaces.anthropic.mapping import (
    classify_family,
    resolve_model,
    thinking_effort,
    to_chat_body,
    to_chat_request,
)
from freellm.surfaces.anthropic.render import (
    MessagesRenderer,
    anthropic_error_body,
    error_type_for_status,
    message_body,
    stop_reason,
    tool_input,
)
from freellm.surfaces.anthropic.wire import parse_messages_request
from tests.unit.helpers import check_golden, golden_files, surface_catalog

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "anthropic"
USER = {"role": "user", "content": "hi"}


def chat(body: dict[str, Any], model: str = "auto") -> dict[str, Any]:
    """Anthropic body → canonical chat body."""
    return to_chat_body(parse_messages_request(body), model)


def reject(body: object) -> ClientError:
    with pytest.raises(ClientError) as info:
        req = parse_messages_request(body)
        to_chat_request(req, "auto")
    err = info.value
    assert err.status == 400 and err.type == "invalid_request_error"
    assert err.message.startswith("Invalid request: ")
    return err


# ---- request mapping table -------------------------------------------------------------------------

MAPPING: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "minimal: string content, default max_tokens": (
        {"model": "claude-sonnet-4-5", "messages": [USER]},
        {"messages": [USER], "stream": False, "max_tokens": 1024},
    ),
    "system string": (
        {"system": "Be brief.", "max_tokens": 50, "messages": [USER]},
        {"messages": [{"role": "system", "content": "Be brief."}, USER], "max_tokens": 50},
    ),
    "system blocks joined by newline": (
        {
            "system": [
                {"type": "text", "text": "You are Claude Code."},
                {"type": "text", "text": "Be careful."},
            ],
            "messages": [USER],
        },
        {"messages": [{"role": "system", "content": "You are Claude Code.\nBe careful."}, USER]},
    ),
    "system role messages in the middle are hoisted after the system field": (
        {
            "system": "top",
            "messages": [
                USER,
                {"role": "assistant", "content": "hello"},
                {"role": "system", "content": [{"type": "text", "text": "reminder"}]},
                {"role": "user", "content": "again"},
            ],
        },
        {
            "messages": [
                {"role": "system", "content": "top\n\nreminder"},
                USER,
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"},
            ]
        },
    ),
    "text blocks joined, empty ones dropped, unknown and unsigned thinking blocks dropped": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "text", "text": ""},
                        {"type": "search_result", "source": "x"},
                        {"type": "text", "text": "b"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": ""},
                        {"type": "text", "text": "answer"},
                    ],
                },
            ]
        },
        {"messages": [{"role": "user", "content": "a\nb"}, {"role": "assistant", "content": "answer"}]},
    ),
    "one signed thinking block → reasoning_content + reasoning_signature": (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "EqQBsig"},
                        {"type": "text", "text": "answer"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
                    ],
                },
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": "answer",
                    "tool_calls": [
                        {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                    "reasoning_content": "hmm",
                    "reasoning_signature": "EqQBsig",
                },
            ]
        },
    ),
    "several thinking blocks or redacted thinking → thinking_blocks verbatim, texts joined, no signature": (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "one", "signature": "sig1"},
                        {"type": "redacted_thinking", "data": "xyz"},
                        {"type": "thinking", "thinking": "unsigned", "signature": ""},
                        {"type": "thinking", "thinking": "two", "signature": "sig2"},
                        {"type": "text", "text": "answer"},
                    ],
                },
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": "answer",
                    "thinking_blocks": [
                        {"type": "thinking", "thinking": "one", "signature": "sig1"},
                        {"type": "redacted_thinking", "data": "xyz"},
                        {"type": "thinking", "thinking": "two", "signature": "sig2"},
                    ],
                    "reasoning_content": "one\ntwo",
                },
            ]
        },
    ),
    "images: base64 → data URL, url → url, order kept": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                        },
                        {"type": "text", "text": "what is this?"},
                        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.jpg"}},
                    ],
                }
            ]
        },
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                        {"type": "text", "text": "what is this?"},
                        {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}},
                    ],
                }
            ]
        },
    ),
    "tool_use → tool_calls; tool_result → tool messages before that turn's user text": (
        {
            "messages": [
                {"role": "user", "content": "weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_2",
                            "name": "get_weather",
                            "input": {"city": "Rome"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Also, thanks!"},
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": [
                                {"type": "text", "text": "21C"},
                                {"type": "image", "source": {"type": "url", "url": "https://x.test/r.png"}},
                                {"type": "text", "text": "sunny"},
                            ],
                        },
                    ],
                },
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "weather in Paris and Rome?"},
                {
                    "role": "assistant",
                    "content": "Checking.",
                    "tool_calls": [
                        {
                            "id": "toolu_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        },
                        {
                            "id": "toolu_2",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
                {"role": "tool", "tool_call_id": "toolu_2", "content": "21C\nsunny"},
                {"role": "user", "content": "Also, thanks!"},
            ]
        },
    ),
    "assistant with only tool_use: content null; tool_result is_error, object and empty content": (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "run", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True},
                        {"type": "tool_result", "tool_use_id": "t2", "content": {"ok": True}},
                        {"type": "tool_result", "tool_use_id": "t3"},
                    ],
                },
            ]
        },
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "t1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "t1", "content": "Error: boom"},
                {"role": "tool", "tool_call_id": "t2", "content": '{"ok":true}'},
                {"role": "tool", "tool_call_id": "t3", "content": ""},
            ]
        },
    ),
    "tools: input_schema → parameters, server tools dropped, tool_choice any → required": (
        {
            "messages": [USER],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
                {"name": "noop"},
                {"type": "custom", "name": "c", "input_schema": {"type": "object"}},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
                {"type": "computer_20250124", "name": "computer", "display_width_px": 1024},
                {"type": "bash_20250124", "name": "bash"},
            ],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        },
        {
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                        "description": "Weather",
                    },
                },
                {
                    "type": "function",
                    "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}},
                },
                {"type": "function", "function": {"name": "c", "parameters": {"type": "object"}}},
            ],
            "tool_choice": "required",
            "parallel_tool_calls": False,
        },
    ),
    "tool_choice tool → named function": (
        {
            "messages": [USER],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "f"},
        },
        {"tool_choice": {"type": "function", "function": {"name": "f"}}},
    ),
    "tool_choice none and auto": (
        {"messages": [USER], "tools": [{"name": "f"}], "tool_choice": {"type": "none"}},
        {"tool_choice": "none"},
    ),
    "only server tools: no tools, no tool_choice forwarded": (
        {
            "messages": [USER],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "auto"},
        },
        {"tools": None, "tool_choice": None},
    ),
    "sampling, stop_sequences forwarded as stop, max_tokens ≤ 0 → default": (
        {
            "messages": [USER],
            "max_tokens": 0,
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "stop_sequences": ["\n\nHuman:", "END"],
            "stream": True,
            "metadata": {"user_id": "u1"},
            "service_tier": "auto",
        },
        {
            "max_tokens": 1024,
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "stop": ["\n\nHuman:", "END"],
            "stream": True,
            "metadata": None,
            "service_tier": None,
        },
    ),
    "thinking enabled with budget → reasoning_effort": (
        {"messages": [USER], "thinking": {"type": "enabled", "budget_tokens": 10000}},
        {"reasoning_effort": "medium"},
    ),
    "thinking adaptive → no knob": (
        {"messages": [USER], "thinking": {"type": "adaptive"}},
        {"reasoning_effort": None},
    ),
    "output_config: effort when thinking sets none, JSON schema format → response_format": (
        {
            "messages": [USER],
            "thinking": {"type": "adaptive"},
            "output_config": {
                "effort": "max",
                "format": {"type": "json_schema", "schema": {"type": "object"}},
            },
        },
        {
            "reasoning_effort": "high",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": {"type": "object"}},
            },
        },
    ),
    "thinking budget wins over output_config.effort": (
        {
            "messages": [USER],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "output_config": {"effort": "high"},
        },
        {"reasoning_effort": "low"},
    ),
    "thinking disabled → none": (
        {"messages": [USER], "thinking": {"type": "disabled"}},
        {"reasoning_effort": "none"},
    ),
}


@pytest.mark.parametrize("name", list(MAPPING))
def test_request_mapping(name: str) -> None:
    anthropic_body, expected = MAPPING[name]
    out = chat(anthropic_body)
    for key, value in expected.items():
        assert out.get(key) == value, key
    # Whatever the mapping produced is a valid canonical request.
    to_chat_request(parse_messages_request(anthropic_body), "auto")


def test_text_documents_are_inlined_in_a_fence_with_the_turn_text() -> None:
    out = chat(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "title": 'My "notes"\n<v2>',
                            "source": {"type": "text", "media_type": "text/plain", "data": "line one"},
                        },
                        {"type": "text", "text": "Summarise."},
                        {
                            "type": "document",
                            "source": {"type": "content", "content": [{"type": "text", "text": "c"}]},
                        },
                    ],
                }
            ]
        }
    )
    [msg] = out["messages"]
    lines = msg["content"].split("\n")
    tag = lines[0][1:].split(" ", 1)[0]
    assert len(tag) == len("document-") + 12
    assert lines[:4] == [f'<{tag} title="My notes v2">', "line one", f"</{tag}>", "Summarise."]
    tag2 = lines[4][1:].split(" ", 1)[0]
    assert lines[4:] == [f'<{tag2} title="document">', "c", f"</{tag2}>"]


def test_document_fence_is_content_derived_and_never_in_the_body() -> None:
    from freellm.surfaces.anthropic import documents
    from freellm.surfaces.anthropic.wire import DocumentBlock

    text = documents.document_text(DocumentBlock(type="document", source={"type": "text", "data": "abc"}))
    tag = "document-" + hashlib.sha256(b"abc").hexdigest()[:12]
    assert text == f'<{tag} title="document">\nabc\n</{tag}>'

    # A body containing the first window's fence gets the next window.
    digest = "0123456789abcdef" * 4
    assert documents.fence_tag("plain", digest) == "document-0123456789ab"
    assert documents.fence_tag("quoting </document-0123456789ab> inside", digest) == "document-123456789abc"


# ---- prompt-caching markers (cache_control) --------------------------------------------------------

GOLDEN_REQUESTS = GOLDEN.parent / "anthropic_requests"
EPH = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def text(t: str, marker: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "text", "text": t} | ({"cache_control": marker} if marker else {})


def test_unmarked_requests_map_byte_identically_to_before() -> None:
    """The baseline was recorded before markers were carried: without a marker nothing changed, key
    order included."""
    doc = json.loads((GOLDEN_REQUESTS / "unmarked_baseline.json").read_text())
    assert len(doc["cases"]) >= len([n for n in MAPPING if "cache" not in n])
    for case in doc["cases"]:
        assert "cache_control" not in json.dumps(case["request"]), case["name"]
        assert orjson.dumps(chat(case["request"])) == orjson.dumps(case["expected"]), case["name"]


def documents_text(data: str) -> str:
    from freellm.surfaces.anthropic import documents
    from freellm.surfaces.anthropic.wire import DocumentBlock

    out = documents.document_text(DocumentBlock(type="document", source={"type": "text", "data": data}))
    assert out is not None
    return out


MARKED: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "marked system blocks become parts; the system string and hoisted system messages join them": (
        {
            "system": [text("You are Claude Code.", EPH), text("Be careful.")],
            "messages": [
                USER,
                {"role": "system", "content": [text("reminder"), text("", EPH), text("tail", HOUR)]},
                {"role": "system", "content": "plain"},
            ],
        },
        [
            {
                "role": "system",
                "content": [
                    text("You are Claude Code.", EPH),
                    text("Be careful."),
                    text("reminder"),
                    text("tail", HOUR),
                    text("plain"),
                ],
            },
            USER,
        ],
    ),
    "a marked block in a later system message makes the whole hoisted system parts": (
        {"system": "top", "messages": [USER, {"role": "system", "content": [text("late", EPH)]}]},
        [{"role": "system", "content": [text("top"), text("late", EPH)]}, USER],
    ),
    "user text blocks keep their boundaries and marker; empty and unknown blocks still dropped": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        text("<system-reminder>ctx</system-reminder>"),
                        text(""),
                        {"type": "search_result", "source": "x"},
                        text("list files", EPH),
                    ],
                }
            ]
        },
        [{"role": "user", "content": [text("<system-reminder>ctx</system-reminder>"), text("list files", EPH)]}],
    ),
    "a marked image keeps its marker on the image part": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://x.test/a.jpg"},
                            "cache_control": EPH,
                        },
                        text("what is this?"),
                    ],
                }
            ]
        },
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}, "cache_control": EPH},
                    text("what is this?"),
                ],
            }
        ],
    ),
    "assistant text parts and a marked tool_use (marker on the tool call)": (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [
                        text("Checking."),
                        text("Now.", EPH),
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {}, "cache_control": EPH},
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
            ],
            "tools": [{"name": "f"}],
        },
        [
            USER,
            {
                "role": "assistant",
                "content": [text("Checking."), text("Now.", EPH)],
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                        "cache_control": EPH,
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "ok"},
        ],
    ),
    "tool_result markers: on the block (last part), inside it, with is_error, with nothing to mark": (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"t{i}", "name": "f", "input": {}} for i in range(1, 6)
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "18C", "cache_control": EPH},
                        {
                            "type": "tool_result",
                            "tool_use_id": "t2",
                            "content": [
                                text("a", HOUR),
                                {"type": "image", "source": {"type": "url", "url": "https://x.test/r.png"}},
                                text("b"),
                            ],
                            "cache_control": EPH,
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "t3",
                            "content": [text("x"), text("boom", EPH)],
                            "is_error": True,
                        },
                        {"type": "tool_result", "tool_use_id": "t4", "content": {"ok": True}, "cache_control": EPH},
                        {"type": "tool_result", "tool_use_id": "t5", "content": "", "cache_control": EPH},
                        text("next", EPH),
                    ],
                },
            ],
            "tools": [{"name": "f"}],
        },
        [
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"t{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for i in range(1, 6)
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": [text("18C", EPH)]},
            {"role": "tool", "tool_call_id": "t2", "content": [text("a", HOUR), text("b", EPH)]},
            {"role": "tool", "tool_call_id": "t3", "content": [text("Error: x"), text("boom", EPH)]},
            {"role": "tool", "tool_call_id": "t4", "content": [text('{"ok":true}', EPH)]},
            {"role": "tool", "tool_call_id": "t5", "content": ""},  # nothing to cache: marker dropped
            {"role": "user", "content": [text("next", EPH)]},
        ],
    ),
    "a marked text document is one marked part": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "document", "source": {"type": "text", "data": "abc"}, "cache_control": EPH},
                        text("Summarise."),
                    ],
                }
            ]
        },
        [
            {
                "role": "user",
                "content": [
                    text(documents_text("abc"), EPH),
                    text("Summarise."),
                ],
            }
        ],
    ),
    "a cache_control that is not an object is no marker": (
        {"system": [{"type": "text", "text": "s", "cache_control": "yes"}], "messages": [USER]},
        [{"role": "system", "content": "s"}, USER],
    ),
}


@pytest.mark.parametrize("name", list(MARKED))
def test_markers_ride_on_the_parts_they_were_set_on(name: str) -> None:
    anthropic_body, expected = MARKED[name]
    assert chat(anthropic_body)["messages"] == expected
    to_chat_request(parse_messages_request(anthropic_body), "auto")  # a valid canonical request


def test_tool_markers_kept_and_dropped_with_server_tools() -> None:
    out = chat(
        {
            "messages": [USER],
            "tools": [
                {"name": "a", "input_schema": {"type": "object"}},
                {"name": "b", "input_schema": {"type": "object"}, "cache_control": EPH},
                {"type": "web_search_20250305", "name": "web_search", "cache_control": EPH},
            ],
        }
    )
    assert out["tools"] == [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}, "cache_control": EPH},
    ]
    req = to_chat_request(
        parse_messages_request({"messages": [USER], "tools": [{"name": "b", "cache_control": EPH}]}), "auto"
    )
    assert req.upstream_body("m", stream=False)["tools"][0]["cache_control"] == EPH


def test_count_tokens_counts_marked_parts_per_block() -> None:
    req = to_chat_request(
        parse_messages_request({"system": [text("abcd", EPH), text("efgh")], "messages": [USER]}), "auto"
    )
    assert req.text_token_estimate == 1 + 1 + 1  # ⌈4/4⌉ per system block + "hi"


# ---- marked parts on every upstream kind -----------------------------------------------------------


def _views(anthropic_body: dict[str, Any]) -> dict[str, Any]:
    """One Anthropic request as each upstream kind would receive it."""
    canonical = chat(anthropic_body, "claude-sonnet-4-5")
    upstream = to_chat_request(parse_messages_request(anthropic_body), "auto").upstream_body(
        "claude-sonnet-4-5", stream=True
    )
    return {
        "canonical": canonical,
        "anthropic_upstream": to_messages_request(upstream),
        "openai_upstream": without_cache_control(upstream),
        "gemini_upstream": to_gemini_request(upstream),
    }


@pytest.mark.parametrize("path", golden_files(GOLDEN_REQUESTS, "marked"), ids=lambda p: p.stem)
def test_marked_request_on_every_upstream_kind_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    actual = _views(doc["request"])
    check_golden(path, doc, actual)
    # Anthropic: the markers arrive on the blocks; the simulator checks the request as Anthropic does.
    ANTHROPIC_WIRE.parse_request(actual["anthropic_upstream"], {})
    # OpenAI-compatible (not OpenRouter): no marker anywhere, strings where the surface sends strings.
    assert "cache_control" not in json.dumps(actual["openai_upstream"])
    OPENAI_WIRE.parse_request(actual["openai_upstream"], {})
    # Gemini: no marker either (its translator keeps only the text).
    assert "cache_control" not in json.dumps(actual["gemini_upstream"])


def test_openai_upstream_sees_the_unmarked_strings() -> None:
    """Stripping the markers of a marked request gives the body the same request without markers maps
    to (but for the separator between hoisted system sources: one newline instead of a blank line)."""
    marked = {
        "system": [text("S1", EPH), text("S2")],
        "messages": [
            {"role": "user", "content": [text("a"), text("b", EPH)]},
            {"role": "assistant", "content": [text("c", EPH)]},
            {"role": "user", "content": "d"},
        ],
        "tools": [{"name": "f", "cache_control": EPH}],
    }
    unmarked = json.loads(json.dumps(marked).replace(', "cache_control": {"type": "ephemeral"}', ""))
    assert "cache_control" not in json.dumps(unmarked)
    strip = to_chat_request(parse_messages_request(marked), "auto").upstream_body("m", stream=False)
    plain = to_chat_request(parse_messages_request(unmarked), "auto").upstream_body("m", stream=False)
    assert orjson.dumps(without_cache_control(strip)) == orjson.dumps(plain)


def test_without_cache_control_never_touches_its_input() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [
            {"role": "system", "content": [text("s", EPH)], "cache_control": EPH},
            {"role": "user", "content": [text("q"), {"type": "image_url", "image_url": {"url": "u"}, "cache_control": EPH}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}, "cache_control": EPH}],
            },
            {"role": "tool", "tool_call_id": "c", "content": [text("r", EPH)]},
            {"role": "user", "content": [text("plain list")]},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}, "cache_control": EPH}],
    }
    before = copy.deepcopy(body)
    out = without_cache_control(body)
    assert body == before
    assert out["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [text("q"), {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "user", "content": [text("plain list")]},  # unmarked lists are left as the client sent them
    ]
    assert out["messages"][4] is body["messages"][4]
    assert out["tools"] == [{"type": "function", "function": {"name": "f"}}]
    unmarked = {"model": "m", "messages": [{"role": "user", "content": [text("x")]}]}
    assert without_cache_control(unmarked) is unmarked


@pytest.mark.parametrize(
    ("base_url", "keeps"),
    [
        ("https://openrouter.ai/api/v1", True),
        ("https://eu.openrouter.ai/api/v1", True),
        ("https://api.groq.com/openai/v1", False),
        ("http://127.0.0.1:9101/alpha/v1", False),
        ("https://openrouter.ai.evil.test/v1", False),
        ("https://notopenrouter.ai/v1", False),
    ],
)
def test_only_openrouter_gets_the_markers(base_url: str, keeps: bool) -> None:
    assert accepts_cache_control(base_url) is keeps


def test_stop_sequences_capped_at_four() -> None:
    out = chat({"messages": [USER], "stop_sequences": ["a", "b", "c", "d", "e"]})
    assert out["stop"] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("kind", "budget", "effort"),
    [
        ("enabled", None, "medium"),
        ("enabled", 1024, "low"),
        ("enabled", 4096, "medium"),
        ("enabled", 16383, "medium"),
        ("enabled", 16384, "high"),
        ("adaptive", None, None),
        ("auto", None, None),
        ("adaptive", 20000, "high"),
        ("disabled", None, "none"),
        ("OFF", 5000, "none"),
        ("something-new", None, "medium"),
    ],
)
def test_thinking_effort(kind: str, budget: int | None, effort: str | None) -> None:
    assert thinking_effort(kind, budget) == effort


# ---- validation --------------------------------------------------------------------------------------

BAD: dict[str, tuple[object, str]] = {
    "not an object": ([1, 2], "body: Input should be a JSON object"),
    "missing messages": ({"model": "claude-sonnet-4-5", "max_tokens": 10}, "messages: Field required"),
    "empty messages": ({"messages": []}, "messages: Array should have at least 1 item"),
    "messages not an array": ({"messages": "hi"}, "messages: Input should be an array"),
    "content wrong type": (
        {"messages": [{"role": "user", "content": 5}]},
        "messages.0.content: Input should be a string or an array of content blocks",
    ),
    "block without type": (
        {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
        "messages.0.content.0: Input should be a content block object",
    ),
    "text not a string": (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        "messages.0.content.0.text: Input should be a string",
    ),
    "bad role": ({"messages": [{"role": "bot", "content": "x"}]}, "messages.0.role: Input should be"),
    "tool_use without id": (
        {
            "messages": [
                USER,
                {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
            ]
        },
        "messages.1.content.0.id: Field required",
    ),
    "nested tool_result block": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text"}]}],
                }
            ]
        },
        "messages.0.content.0.content.0.text: Field required",
    ),
    "max_tokens not an integer": (
        {"messages": [USER], "max_tokens": "100"},
        "max_tokens: Input should be an integer",
    ),
    "temperature out of range": (
        {"messages": [USER], "temperature": 1.5},
        "temperature: Input should be less than",
    ),
    "stream not a boolean": ({"messages": [USER], "stream": "yes"}, "stream: Input should be a boolean"),
    "tool without name": (
        {"messages": [USER], "tools": [{"input_schema": {}}]},
        "tools.0.name: Field required",
    ),
    "bad tool_choice": (
        {"messages": [USER], "tool_choice": {"type": "sometimes"}},
        "tool_choice.type: Input should be",
    ),
    "system wrong type": ({"messages": [USER], "system": 7}, "system: Input should be a string or an array"),
    "image with a file source": (
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}
            ]
        },
        "messages.0.content.0.source: images from the Files API",
    ),
    "image base64 without data": (
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}]},
        "messages.0.content.0.source: a base64 image needs",
    ),
    "PDF document (base64)": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": "JVBERi0xLjQK",
                            },
                        },
                        {"type": "text", "text": "Summarise"},
                    ],
                }
            ]
        },
        "messages.0.content.0: PDF documents (source type `base64`) cannot be forwarded",
    ),
    "PDF document (url)": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}
                    ],
                }
            ]
        },
        "messages.0.content.0: PDF documents (source type `url`)",
    ),
    "empty text document": (
        {
            "messages": [
                {"role": "user", "content": [{"type": "document", "source": {"type": "text", "data": ""}}]}
            ]
        },
        "messages.0.content.0: document is empty",
    ),
    "nothing left to send": (
        {"messages": [{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}]},
        "messages: at least one user or assistant message",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_a_400_naming_the_anthropic_path(name: str) -> None:
    body, expected = BAD[name]
    err = reject(body)
    assert expected in err.message, err.message


def test_pdf_refusal_lists_distinct_reasons_and_never_echoes_the_payload() -> None:
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "SECRETPAYLOAD"},
    }
    url = {"type": "document", "source": {"type": "url", "url": "https://x.test/secret.pdf"}}
    err = reject({"messages": [{"role": "user", "content": [pdf, pdf, url, pdf]}]})
    assert "SECRETPAYLOAD" not in err.message and "secret.pdf" not in err.message
    assert err.message.count("cannot be forwarded") == 2  # two distinct reasons, the repeats folded


def test_validation_reports_at_most_five_issues() -> None:
    err = reject({"messages": [{"role": "x", "content": 1}] * 10, "max_tokens": "a", "temperature": "b"})
    assert err.message.count(": ") <= 6


# ---- model resolution --------------------------------------------------------------------------------


def catalog(model_map: dict[str, str] | None = None) -> tuple[Catalog, dict[str, str]]:
    return surface_catalog("anthropic", model_map)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("claude-opus-4-5-20251101", "opus"),
        ("claude-sonnet-4-5", "sonnet"),
        ("claude-3-5-haiku-latest", "haiku"),
        ("Claude-Sonnet-4", "sonnet"),
        ("opusplan", "default"),
        ("claude-3-7", "default"),
        ("", "default"),
        ("auto", "default"),
        ("gpt-4o", "default"),
    ],
)
def test_classify_family(name: str, family: str) -> None:
    assert classify_family(name, {"opus": "a", "sonnet": "b", "haiku": "c", "default": "d"}) == family


def test_classify_family_longest_operator_key_wins() -> None:
    m = {"opus": "a", "opus-4-5": "b", "opusplan": "c", "default": "d"}
    assert classify_family("claude-opus-4-5", m) == "opus-4-5"
    assert classify_family("claude-opus-4-1", m) == "opus"
    assert classify_family("opusplan", m) == "opusplan"


@pytest.mark.parametrize(
    ("requested", "routed"),
    [
        ("claude-opus-4-5", "big-model"),
        ("claude-sonnet-4-5-20250929", "alpha/model-x"),
        ("claude-haiku-4-5", "auto"),  # the map points to a disabled model → auto
        ("claude-3-7-whatever", "auto"),  # default family
        ("opusplan", "auto"),
        ("claude/model-x", "model-x"),  # claude/<id> pins a catalog id
        ("claude/nope", "auto"),
        ("model-x", "model-x"),  # a configured group is used as is
        ("alpha/big-model", "alpha/big-model"),  # so is a route
        ("auto", "auto"),
        ("off-model", "auto"),  # disabled → not routable → default family
        ("gpt-4o", "auto"),  # unknown, not Claude: never a 404
        (None, "auto"),
    ],
)
def test_resolve_model_never_404(requested: str | None, routed: str) -> None:
    cat, model_map = catalog(
        {"opus": "big-model", "sonnet": "alpha/model-x", "haiku": "off-model", "default": "auto"}
    )
    assert resolve_model(requested, cat, model_map) == routed


def test_resolve_model_default_map_is_auto() -> None:
    cat, model_map = catalog()
    assert resolve_model("claude-opus-4-5", cat, model_map) == "auto"


# ---- stream renderer: golden fixtures --------------------------------------------------------------

GOLDEN_CASES = sorted(p.stem for p in GOLDEN.glob("*.json"))


def expected_bytes(frames: list[dict[str, Any]]) -> bytes:
    return b"".join(
        b"event: " + f["event"].encode() + b"\ndata: " + orjson.dumps(f["data"]) + b"\n\n" for f in frames
    )


def test_golden_fixtures_cover_the_required_cases() -> None:
    assert {"text", "reasoning_text", "tool_calls_only", "text_then_tool_calls", "error_after_commit"} <= set(
        GOLDEN_CASES
    )


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_stream_renderer_golden(name: str) -> None:
    fx = json.loads((GOLDEN / f"{name}.json").read_text())
    renderer = MessagesRenderer(fx["model"], input_tokens=fx["input_tokens"], message_id=fx["message_id"])
    assert renderer.content_type == "text/event-stream"
    out = b"".join(renderer.chunks(copy.deepcopy(batch)) for batch in fx["batches"])
    end = fx["end"]
    if end == "done":
        out += renderer.done()
    else:
        out += renderer.stream_error(end["stream_error"]["provider"], end["stream_error"]["message"])
    assert out == expected_bytes(fx["frames"])
    check_event_grammar(fx["frames"], errored=end != "done")


def check_event_grammar(frames: list[dict[str, Any]], *, errored: bool) -> None:
    """Structural invariants every Anthropic client relies on, independent of the fixture's content."""
    events = [f["event"] for f in frames]
    assert all(f["data"]["type"] == f["event"] for f in frames)
    assert events[0] == "message_start"
    assert frames[0]["data"]["message"]["content"] == []
    if errored:
        assert events[-1] == "error" and events.count("error") == 1
        assert "message_stop" not in events
        return
    assert events[-2:] == ["message_delta", "message_stop"]
    open_index: int | None = None
    next_index = 0
    for f in frames[1:-2]:
        d = f["data"]
        if f["event"] == "content_block_start":
            assert open_index is None and d["index"] == next_index
            open_index = d["index"]
            if d["content_block"]["type"] == "tool_use":
                assert d["content_block"]["input"] == {}
        elif f["event"] == "content_block_delta":
            assert d["index"] == open_index
        elif f["event"] == "content_block_stop":
            assert d["index"] == open_index
            open_index, next_index = None, next_index + 1
    assert open_index is None
    # Each tool_use block has exactly one input_json_delta with complete JSON.
    for i, f in enumerate(frames):
        if f["event"] == "content_block_start" and f["data"]["content_block"]["type"] == "tool_use":
            delta = frames[i + 1]["data"]["delta"]
            assert delta["type"] == "input_json_delta"
            assert isinstance(json.loads(delta["partial_json"]), dict)
            assert frames[i + 2]["event"] == "content_block_stop"


def test_renderer_generates_tool_ids_when_upstream_gave_none() -> None:
    r = MessagesRenderer("m", input_tokens=1, message_id="msg_x")
    batch = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "call_stream_0", "function": {"name": "f", "arguments": "{}"}},
                            {
                                "index": 1,
                                "id": "call_stream_1",
                                "function": {"name": "g", "arguments": "not json"},
                            },
                            {"index": 2, "id": "x", "function": {"name": "", "arguments": "{}"}},
                        ]
                    },
                    "finish_reason": None,
                }
            ]
        }
    ]
    frames = [
        json.loads(line[6:]) for line in r.chunks(batch).decode().splitlines() if line.startswith("data: ")
    ]
    starts = [f["content_block"] for f in frames if f["type"] == "content_block_start"]
    assert [s["name"] for s in starts] == ["f", "g"]  # an unnamed call is dropped
    assert all(s["id"].startswith("toolu_") for s in starts)
    assert starts[0]["id"] != starts[1]["id"]
    deltas = [f["delta"]["partial_json"] for f in frames if f["type"] == "content_block_delta"]
    assert deltas == ["{}", "{}"]


# ---- non-stream ---------------------------------------------------------------------------------------


def outcome(result: PumpResult, tokens_out: int = 7) -> TurnOutcome:
    attempt: Attempt = None  # type: ignore[assignment]  # message_body never looks at the attempt
    return TurnOutcome(attempt=attempt, result=result, ttfb_ms=None, tokens_out=tokens_out)


def test_message_body_thinking_text_tool_use() -> None:
    result = PumpResult(
        text="Let me look.",
        reasoning="plan",
        tool_calls=[ToolCall(id="call_1", name="get_weather", arguments='{"city":"Paris"}')],
        finish_reason="tool_calls",
        usage={"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
    )
    body = message_body(outcome(result), model="claude-sonnet-4-5", input_estimate=5, message_id="msg_abc")
    assert body == {
        "id": "msg_abc",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": ""},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 12},
    }


def test_message_body_estimates_usage_and_maps_length() -> None:
    body = message_body(outcome(PumpResult(text="cut", finish_reason="length")), model="m", input_estimate=5)
    assert body["id"].startswith("msg_") and len(body["id"]) == 28
    assert body["stop_reason"] == "max_tokens"
    assert body["usage"] == {"input_tokens": 5, "output_tokens": 7}
    assert body["content"] == [{"type": "text", "text": "cut"}]


@pytest.mark.parametrize(
    ("finish", "tools", "reason"),
    [
        ("stop", False, "end_turn"),
        (None, False, "end_turn"),
        ("length", False, "max_tokens"),
        ("tool_calls", False, "tool_use"),
        ("stop", True, "tool_use"),
        ("stop_sequence", False, "stop_sequence"),
        ("content_filter", False, "refusal"),
        ("weird", False, "end_turn"),
    ],
)
def test_stop_reason(finish: str | None, tools: bool, reason: str) -> None:
    assert stop_reason(finish, tools) == reason


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("[1]", {}),
        ("nope", {}),
        ('"{\\"a\\": 1}"', {"a": 1}),
    ],
)
def test_tool_input(args: str, expected: dict[str, Any]) -> None:
    assert tool_input(args) == expected


# ---- errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (529, "overloaded_error"),
    ],
)
def test_error_type_for_status(status: int, kind: str) -> None:
    assert error_type_for_status(status) == kind


def test_error_envelope() -> None:
    body = anthropic_error_body(
        ClientError(401, "Invalid API key", type="authentication_error", code="invalid_api_key")
    )
    assert body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "Invalid API key", "code": "invalid_api_key"},
    }
    ex = Exhausted(429, "rate_limit_error", "rate_limit_exceeded", "All models rate-limited", retry_at_ms=123)
    assert anthropic_error_body(ex) == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "All models rate-limited",
            "code": "rate_limit_exceeded",
            "retryAtMs": 123,
        },
    }
    assert (
        anthropic_error_body(Exhausted(502, "provider_error", "upstream_failed", "x"))["error"]["type"]
        == "api_error"
    )
