"""Token estimation (spec/core.md §9): ceil(chars/4) per text block, a flat figure per image."""

from __future__ import annotations

from typing import Any

import pytest

from freellm.config import RoutingConfig
from freellm.core.request import parse_chat_request
from freellm.core.tokens import estimate_input_tokens, estimate_text_tokens, routing_estimate


@pytest.mark.parametrize(
    ("n", "expected"), [(-3, 0), (0, 0), (1, 1), (3, 1), (4, 1), (5, 2), (8, 2), (9, 3), (4001, 1001)]
)
def test_estimate_text_tokens(n: int, expected: int) -> None:
    assert estimate_text_tokens(n) == expected


IMG = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}

INPUT_CASES: list[tuple[str, list[dict[str, Any]], int]] = [
    ("one string", [{"role": "user", "content": "abcde"}], 2),
    ("empty string", [{"role": "user", "content": ""}], 0),
    (
        "ceil per block, not per total",
        [{"role": "user", "content": ["a", "b", {"type": "text", "text": "c"}]}],
        3,
    ),
    ("messages summed", [{"role": "system", "content": "x" * 8}, {"role": "user", "content": "y" * 9}], 5),
    ("image parts", [{"role": "user", "content": ["hi", IMG, {"type": "image", "source": {}}]}], 1 + 2000),
    ("image url text not counted", [{"role": "user", "content": [{**IMG, "text": "x" * 400}]}], 1000),
    (
        "non-text parts without text",
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
        0,
    ),
    ("non-string text ignored", [{"role": "user", "content": [{"type": "text", "text": 5}]}], 0),
    (
        "assistant/tool contents counted, tool-call args not",
        [
            {"role": "user", "content": "abcd"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "f", "arguments": "x" * 400}}],
            },
            {"role": "tool", "content": "abcdefgh"},
            {"role": "assistant", "content": "abc", "reasoning_content": "r" * 400},
        ],
        1 + 0 + 2 + 1,
    ),
    ("unicode counts characters", [{"role": "user", "content": "héllo"}], 2),
]


@pytest.mark.parametrize(
    ("messages", "expected"), [(m, e) for _, m, e in INPUT_CASES], ids=[n for n, _, _ in INPUT_CASES]
)
def test_estimate_input_tokens(messages: list[dict[str, Any]], expected: int) -> None:
    req = parse_chat_request({"messages": messages})
    assert estimate_input_tokens(req) == expected
    assert estimate_input_tokens(req) == expected  # cached, same answer


def test_tool_schemas_are_not_counted() -> None:
    tools = [{"function": {"name": "f", "description": "d" * 4000, "parameters": {"type": "object"}}}]
    plain = parse_chat_request({"messages": [{"role": "user", "content": "abcd"}]})
    with_tools = parse_chat_request({"messages": [{"role": "user", "content": "abcd"}], "tools": tools})
    assert estimate_input_tokens(plain) == estimate_input_tokens(with_tools) == 1


def test_custom_image_tokens() -> None:
    req = parse_chat_request({"messages": [{"role": "user", "content": ["abcd", IMG, IMG]}]})
    assert estimate_input_tokens(req, image_tokens=85) == 1 + 170
    assert estimate_input_tokens(req) == 1 + 2000


@pytest.mark.parametrize(
    ("fields", "kwargs", "expected"),
    [
        ({}, {}, 1 + 1000),
        ({"max_tokens": 500}, {}, 1 + 500),
        ({"max_tokens": 5000}, {}, 1 + 2000),
        ({"max_tokens": 0}, {}, 1 + 1000),
        ({"max_tokens": -1}, {}, 1 + 1000),
        ({"max_completion_tokens": 300}, {}, 1 + 300),
        ({"max_tokens": 5000}, {"reserve_cap": 8000}, 1 + 5000),
        ({}, {"reserve_default": 50}, 1 + 50),
        ({}, {"reserve_default": 5000, "reserve_cap": 3000}, 1 + 3000),
    ],
)
def test_routing_estimate(fields: dict[str, Any], kwargs: dict[str, int], expected: int) -> None:
    req = parse_chat_request({"messages": [{"role": "user", "content": "abcd"}], **fields})
    assert routing_estimate(req, **kwargs) == expected


def test_routing_estimate_with_images_and_config_defaults() -> None:
    cfg = RoutingConfig()
    req = parse_chat_request(
        {"messages": [{"role": "user", "content": ["abcdefgh", IMG]}], "max_tokens": 4096}
    )
    expected = 2 + cfg.image_token_estimate + cfg.output_reserve_cap
    assert routing_estimate(req) == expected
    assert (
        routing_estimate(
            req,
            reserve_default=cfg.output_reserve_default,
            reserve_cap=cfg.output_reserve_cap,
            image_tokens=cfg.image_token_estimate,
        )
        == expected
    )
    assert routing_estimate(req, image_tokens=10) == 2 + 10 + 2000
