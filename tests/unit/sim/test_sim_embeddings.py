"""The simulator's embeddings, pure parts: the deterministic vectors, token counts, the base64 encoding,
and how the OpenAI and Gemini embeddings bodies are checked and answered (no server here; the wire
tests are in ``test_sim_embeddings_wire.py``)."""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest

from freellm.sim import SimConfigError, SimSettings, sim_vector
from freellm.sim.embeddings import (
    MAX_DIMENSIONS,
    EmbeddingRequestError,
    decode_base64,
    encode_base64,
    text_tokens,
    tokens_text,
)
from freellm.sim.gemini_wire import embed_dialect_for_action
from freellm.sim.gemini_wire.embed import GEMINI_BATCH_EMBED, GEMINI_EMBED, MAX_BATCH
from freellm.sim.openai_embeddings import OPENAI_EMBEDDINGS
from freellm.sim.wire import WireRequestError

# ---- sim_vector ------------------------------------------------------------------------------------------


def test_the_same_arguments_give_the_same_vector() -> None:
    assert sim_vector("emb", "hello", 8) == sim_vector("emb", "hello", 8)
    assert len(sim_vector("emb", "hello", 8)) == 8


@pytest.mark.parametrize("dimensions", [1, 2, 7, 8, 9, 64, 1536, MAX_DIMENSIONS])
def test_vectors_have_unit_length_at_every_width(dimensions: int) -> None:
    vector = sim_vector("emb", "some text", dimensions)
    assert len(vector) == dimensions
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, abs_tol=1e-6)
    assert all(-1.0 <= v <= 1.0 for v in vector)


def test_model_text_and_width_each_change_the_vector() -> None:
    base = sim_vector("emb-a", "hello", 8)
    assert sim_vector("emb-b", "hello", 8) != base
    assert sim_vector("emb-a", "hello!", 8) != base
    assert sim_vector("emb-a", "hello", 9)[:8] != base  # renormalised, so not a prefix either
    # model and text are kept apart: moving a character across the boundary is another vector
    assert sim_vector("ab", "c", 8) != sim_vector("a", "bc", 8)


def test_one_dimension_is_plus_or_minus_one() -> None:
    assert sim_vector("emb", "x", 1) in ([1.0], [-1.0])


def test_values_are_float32_so_base64_round_trips_exactly() -> None:
    vector = sim_vector("emb", "round trip", 16)
    assert all(struct.unpack("<f", struct.pack("<f", v))[0] == v for v in vector)
    assert decode_base64(encode_base64(vector)) == vector


def test_base64_is_little_endian_float32() -> None:
    encoded = encode_base64([1.0, -0.5])
    assert encoded == "AACAPwAAAL8="  # 0x3f800000, 0xbf000000, little-endian
    assert decode_base64(encoded) == [1.0, -0.5]


def test_a_width_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="dimensions"):
        sim_vector("emb", "x", 0)


def test_token_counts_and_token_text() -> None:
    assert [text_tokens(t) for t in ("a", "abcd", "abcde", "x" * 40)] == [1, 1, 2, 10]
    assert tokens_text([1, 20, 300]) == "1 20 300"


# ---- the OpenAI body -------------------------------------------------------------------------------------


def render_openai(body: dict[str, Any], default: int = 8) -> dict[str, Any]:
    call = OPENAI_EMBEDDINGS.parse(body, "")
    result: dict[str, Any] = OPENAI_EMBEDDINGS.render(call, default)
    return result


def test_openai_string_input() -> None:
    answer = render_openai({"model": "emb", "input": "hello world"})
    assert answer == {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": sim_vector("emb", "hello world", 8)}],
        "model": "emb",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }


def test_openai_every_input_shape_and_its_usage() -> None:
    strings = render_openai({"model": "emb", "input": ["a", "bcdefghij"]})
    assert [d["index"] for d in strings["data"]] == [0, 1]
    assert strings["data"][1]["embedding"] == sim_vector("emb", "bcdefghij", 8)
    assert strings["usage"]["prompt_tokens"] == 1 + 3

    one_array = render_openai({"model": "emb", "input": [5, 6, 7]})
    assert [d["embedding"] for d in one_array["data"]] == [sim_vector("emb", "5 6 7", 8)]
    assert one_array["usage"] == {"prompt_tokens": 3, "total_tokens": 3}

    arrays = render_openai({"model": "emb", "input": [[1, 2], [3]]})
    assert [d["embedding"] for d in arrays["data"]] == [
        sim_vector("emb", "1 2", 8),
        sim_vector("emb", "3", 8),
    ]
    assert arrays["usage"]["prompt_tokens"] == 3


def test_openai_dimensions_default_and_override() -> None:
    assert len(render_openai({"model": "emb", "input": "x"}, default=5)["data"][0]["embedding"]) == 5
    answer = render_openai({"model": "emb", "input": "x", "dimensions": 3}, default=5)
    assert answer["data"][0]["embedding"] == sim_vector("emb", "x", 3)


def test_openai_base64_encoding_and_optional_nulls() -> None:
    answer = render_openai({"model": "emb", "input": ["x", "y"], "encoding_format": "base64", "user": "u"})
    assert [decode_base64(d["embedding"]) for d in answer["data"]] == [
        sim_vector("emb", "x", 8),
        sim_vector("emb", "y", 8),
    ]
    plain = render_openai(
        {"model": "emb", "input": "x", "dimensions": None, "encoding_format": None, "user": None}
    )
    assert plain["data"][0]["embedding"] == sim_vector("emb", "x", 8)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": "", "input": "x"}, "model"),
        ({"model": 3, "input": "x"}, "model"),
        ({"model": "emb"}, "input"),
        ({"model": "emb", "input": ""}, "input"),
        ({"model": "emb", "input": []}, "input"),
        ({"model": "emb", "input": ["a", ""]}, "input"),
        ({"model": "emb", "input": ["a", 1]}, "input"),
        ({"model": "emb", "input": [[1], "a"]}, "input"),
        ({"model": "emb", "input": [[1], []]}, "input"),
        ({"model": "emb", "input": [-1]}, "input"),
        ({"model": "emb", "input": [True]}, "input"),
        ({"model": "emb", "input": [1.5]}, "input"),
        ({"model": "emb", "input": {"text": "x"}}, "input"),
        ({"model": "emb", "input": None}, "input"),
        ({"model": "emb", "input": ["x"] * 2049}, "input"),
        ({"model": "emb", "input": "x", "dimensions": 0}, "dimensions"),
        ({"model": "emb", "input": "x", "dimensions": MAX_DIMENSIONS + 1}, "dimensions"),
        ({"model": "emb", "input": "x", "dimensions": "8"}, "dimensions"),
        ({"model": "emb", "input": "x", "dimensions": True}, "dimensions"),
        ({"model": "emb", "input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"model": "emb", "input": "x", "user": 5}, "user"),
        ({"model": "emb", "input": "x", "task": "q"}, "task"),
    ],
)
def test_openai_refuses_bad_bodies_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(EmbeddingRequestError) as info:
        OPENAI_EMBEDDINGS.parse(body, "")
    assert info.value.param == param
    envelope = OPENAI_EMBEDDINGS.render_bad_request(info.value)
    assert envelope["error"]["type"] == "invalid_request_error"
    assert envelope["error"]["param"] == param
    assert envelope["error"]["message"] == str(info.value)
    assert set(envelope["error"]) == {"message", "type", "param", "code"}


def test_openai_refuses_a_body_that_is_not_an_object() -> None:
    for body in (None, "text", [1, 2]):
        with pytest.raises(EmbeddingRequestError):
            OPENAI_EMBEDDINGS.parse(body, "")


def test_openai_match_json_is_the_input() -> None:
    call = OPENAI_EMBEDDINGS.parse({"model": "emb", "input": ["needle here"]}, "")
    assert call.match_json() == '["needle here"]'


# ---- the Gemini bodies -----------------------------------------------------------------------------------


def content(*texts: str) -> dict[str, Any]:
    return {"parts": [{"text": t} for t in texts]}


def test_gemini_embed_content() -> None:
    call = GEMINI_EMBED.parse({"content": content("hello ", "world")}, "gem-emb")
    assert call.model == "gem-emb"
    assert GEMINI_EMBED.render(call, 8) == {"embedding": {"values": sim_vector("gem-emb", "hello world", 8)}}


def test_gemini_embed_content_options_both_spellings() -> None:
    body = {
        "model": "models/gem-emb",
        "content": {"role": "user", **content("x")},
        "taskType": "RETRIEVAL_DOCUMENT",
        "title": "a title",
        "outputDimensionality": 4,
    }
    assert GEMINI_EMBED.render(GEMINI_EMBED.parse(body, "gem-emb"), 8)["embedding"]["values"] == sim_vector(
        "gem-emb", "x", 4
    )
    snake = {"content": content("x"), "task_type": "CLUSTERING", "output_dimensionality": 3}
    assert len(GEMINI_EMBED.render(GEMINI_EMBED.parse(snake, "gem-emb"), 8)["embedding"]["values"]) == 3


def test_gemini_batch_keeps_order_and_per_request_widths() -> None:
    body = {
        "requests": [
            {"model": "models/gem-emb", "content": content("one")},
            {"model": "models/gem-emb", "content": content("two"), "outputDimensionality": 2},
        ]
    }
    answer = GEMINI_BATCH_EMBED.render(GEMINI_BATCH_EMBED.parse(body, "gem-emb"), 8)
    assert answer == {
        "embeddings": [
            {"values": sim_vector("gem-emb", "one", 8)},
            {"values": sim_vector("gem-emb", "two", 2)},
        ]
    }


def test_gemini_batch_of_exactly_the_limit_is_accepted() -> None:
    body = {"requests": [{"model": "models/m", "content": content(str(i))} for i in range(MAX_BATCH)]}
    assert len(GEMINI_BATCH_EMBED.parse(body, "m").inputs) == MAX_BATCH


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "content is not specified"),
        ({"content": content("x"), "extra": 1}, 'Unknown name "extra"'),
        ({"content": {"parts": []}}, "must not be empty"),
        ({"content": {"parts": [{"text": ""}]}}, "text must not be empty"),
        ({"content": {"parts": [{"text": 5}]}}, "expected a string"),
        ({"content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}]}}, "only text"),
        ({"content": {"parts": [{"text": "x"}], "bogus": 1}}, 'Unknown name "bogus"'),
        ({"content": content("x"), "taskType": "GUESSING"}, "TaskType"),
        ({"content": content("x"), "outputDimensionality": 0}, "between 1 and 3072"),
        ({"content": content("x"), "outputDimensionality": MAX_DIMENSIONS + 1}, "between 1 and 3072"),
        ({"content": content("x"), "title": 3}, "title"),
        ({"content": content("x"), "model": "models/other"}, "models/gem-emb"),
        ("not an object", "Expected an object"),
    ],
)
def test_gemini_embed_content_refusals(body: Any, fragment: str) -> None:
    with pytest.raises(WireRequestError) as info:
        GEMINI_EMBED.parse(body, "gem-emb")
    assert fragment in str(info.value)
    envelope = GEMINI_EMBED.render_bad_request(info.value)
    assert envelope == {"error": {"code": 400, "message": str(info.value), "status": "INVALID_ARGUMENT"}}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "requests is not specified"),
        ({"requests": []}, "at least one request"),
        ({"requests": {"model": "models/m"}}, "expected a list"),
        ({"requests": [], "other": 1}, 'Unknown name "other"'),
        ({"requests": [{"content": content("x")}]}, "requests[0].model"),
        ({"requests": [{"model": "m", "content": content("x")}]}, "requests[0].model"),
        (
            {"requests": [{"model": "models/m", "content": content("x")}, {"model": "models/n"}]},
            "requests[1].model",
        ),
        ({"requests": [{"model": "models/m"}]}, "requests[0].content"),
        ({"requests": ["x"]}, "requests[0]"),
        (
            {"requests": [{"model": "models/m", "content": content("x")}] * (MAX_BATCH + 1)},
            "at most 100 requests can be in one batch",
        ),
    ],
)
def test_gemini_batch_refusals(body: Any, fragment: str) -> None:
    with pytest.raises(WireRequestError) as info:
        GEMINI_BATCH_EMBED.parse(body, "m")
    assert fragment in str(info.value)
    assert GEMINI_BATCH_EMBED.render_bad_request(info.value)["error"]["status"] == "INVALID_ARGUMENT"


def test_gemini_actions_route_to_their_dialects() -> None:
    assert embed_dialect_for_action("embedContent") is GEMINI_EMBED
    assert embed_dialect_for_action("batchEmbedContents") is GEMINI_BATCH_EMBED
    assert embed_dialect_for_action("generateContent") is None
    assert embed_dialect_for_action("countTokens") is None


# ---- settings --------------------------------------------------------------------------------------------


def test_embedding_dimensions_setting() -> None:
    assert SimSettings().embedding_dimensions == 8
    assert SimSettings.from_dict({"embedding_dimensions": 768}).embedding_dimensions == 768
    for bad in (0, -1, 1.5, True, "8", MAX_DIMENSIONS + 1):
        with pytest.raises(SimConfigError, match="embedding_dimensions"):
            SimSettings.from_dict({"embedding_dimensions": bad})
