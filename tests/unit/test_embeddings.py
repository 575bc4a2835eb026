"""Embeddings' pure parts: the surfaces' parsers, the upstream wires' builders and readers, the
catalog's family resolution and the config's checks (docs/embeddings.md)."""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import pytest

from freellm.config import Settings
from freellm.core.embeddings import EmbeddingRequest, vector_base64
from freellm.errors import ClientError, UpstreamError
from freellm.providers.embedding_wire import (
    gemini_batch_body,
    gemini_embedding_answer,
    openai_embedding_answer,
    openai_embedding_body,
)
from freellm.routing.catalog import Catalog
from freellm.surfaces.gemini_wire.embed import parse_batch_embed, parse_embed_content
from freellm.surfaces.ollama.wire import EmbedBody, parse_body
from freellm.surfaces.openai_embeddings import parse_embeddings_request


def settings(**extra: Any) -> Settings:
    doc: dict[str, Any] = {
        "providers": [
            {
                "name": "oa",
                "base_url": "https://oa.example/v1",
                "keys": ["k"],
                "models": [
                    {"id": "chat-1"},
                    {"id": "text-embedding-3-small", "kind": "embedding", "family": "te3", "dimensions": 1536},
                    {"id": "nomic-embed", "kind": "embedding"},
                ],
            },
            {
                "name": "gm",
                "kind": "gemini",
                "base_url": "https://gm.example/v1beta",
                "keys": ["k"],
                "models": [{"id": "te3-mirror", "kind": "embedding", "family": "TE3"}],
            },
        ],
        **extra,
    }
    return Settings.model_validate(doc)


# ---- the OpenAI surface's parser -----------------------------------------------------------------------


def test_openai_inputs_string_list_and_tokens() -> None:
    assert parse_embeddings_request({"model": "te3", "input": "hi"}, max_inputs=10).inputs == ("hi",)
    assert parse_embeddings_request({"model": "te3", "input": ["a", "b"]}, max_inputs=10).inputs == ("a", "b")
    one = parse_embeddings_request({"model": "te3", "input": [1, 2, 3]}, max_inputs=10)
    assert one.inputs == ((1, 2, 3),) and one.token_input
    many = parse_embeddings_request({"model": "te3", "input": [[1, 2], [3]], "dimensions": 64}, max_inputs=10)
    assert many.inputs == ((1, 2), (3,)) and many.dimensions == 64
    assert parse_embeddings_request({"input": "x"}, max_inputs=1).requested_model == ""


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "te3"}, "input"),
        ({"model": "te3", "input": ""}, "input"),
        ({"model": "te3", "input": []}, "input"),
        ({"model": "te3", "input": ["a", ""]}, "input"),
        ({"model": "te3", "input": ["a", 3]}, "input"),
        ({"model": "te3", "input": [[1, -2]]}, "input"),
        ({"model": "te3", "input": {"text": "a"}}, "input"),
        ({"model": "te3", "input": ["a", "b", "c"]}, "input"),
        ({"model": 7, "input": "a"}, "model"),
        ({"model": "te3", "input": "a", "dimensions": 0}, "dimensions"),
        ({"model": "te3", "input": "a", "dimensions": True}, "dimensions"),
        ({"model": "te3", "input": "a", "dimensions": "64"}, "dimensions"),
        ({"model": "te3", "input": "a", "encoding_format": "binary"}, "encoding_format"),
        ({"model": "te3", "input": "a", "user": 1}, "user"),
    ],
)
def test_openai_bad_bodies_are_400_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(ClientError) as err:
        parse_embeddings_request(body, max_inputs=2)
    assert err.value.status == 400 and err.value.param == param


def test_base64_is_little_endian_float32() -> None:
    vector = [0.5, -1.25, 3.0]
    assert struct.unpack("<3f", base64.b64decode(vector_base64(vector))) == (0.5, -1.25, 3.0)


# ---- the upstream wires -------------------------------------------------------------------------------


def test_openai_upstream_body_and_answer() -> None:
    req = EmbeddingRequest("te3", ("a", (5, 6)), dimensions=8, user="u1", task_type="RETRIEVAL_QUERY")
    assert openai_embedding_body(req, "text-embedding-3-small") == {
        "model": "text-embedding-3-small",
        "input": ["a", [5, 6]],
        "encoding_format": "float",
        "dimensions": 8,
        "user": "u1",
    }
    raw = orjson.dumps(
        {
            "data": [{"index": 1, "embedding": [3, 4]}, {"index": 0, "embedding": vector_base64([1.0, 2.0])}],
            "usage": {"prompt_tokens": 9},
        }
    )
    answer = openai_embedding_answer(raw, 2, None)
    assert answer.vectors == [[1.0, 2.0], [3.0, 4.0]] and answer.prompt_tokens == 9


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"data": [{"index": 0, "embedding": [1]}]}',
        b'{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]}',
        b'{"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": [2]}]}',
        b'{"data": [{"index": 0, "embedding": ["x"]}, {"index": 1, "embedding": [2]}]}',
        b'{"data": [{"index": 0, "embedding": "%%%"}, {"index": 1, "embedding": [2]}]}',
    ],
)
def test_a_malformed_upstream_answer_is_an_upstream_error(raw: bytes) -> None:
    with pytest.raises(UpstreamError):
        openai_embedding_answer(raw, 2, None)


def test_gemini_upstream_body_and_answer() -> None:
    req = EmbeddingRequest("te3", ("a", "b", "c"), dimensions=4, task_type="RETRIEVAL_DOCUMENT", titles=("t0", None, "t2"))
    body = gemini_batch_body(req, "te3-mirror", 1, ["b", "c"])
    assert body == {
        "requests": [
            {"model": "models/te3-mirror", "content": {"parts": [{"text": "b"}]}, "taskType": "RETRIEVAL_DOCUMENT", "outputDimensionality": 4},
            {
                "model": "models/te3-mirror",
                "content": {"parts": [{"text": "c"}]},
                "taskType": "RETRIEVAL_DOCUMENT",
                "title": "t2",
                "outputDimensionality": 4,
            },
        ]
    }
    assert gemini_embedding_answer(b'{"embeddings": [{"values": [1, 2]}, {"values": [0.5]}]}', 2) == [[1.0, 2.0], [0.5]]
    with pytest.raises(UpstreamError):
        gemini_embedding_answer(b'{"embeddings": [{"values": [1]}]}', 2)


# ---- the Gemini and Ollama surfaces' parsers ------------------------------------------------------------


def test_gemini_embed_content_and_batch() -> None:
    one = parse_embed_content(
        {"content": {"parts": [{"text": "a"}, {"text": "b"}]}, "taskType": "CLUSTERING", "output_dimensionality": 16}, "te3"
    )
    assert one.inputs == ("a\nb",) and one.task_type == "CLUSTERING" and one.dimensions == 16
    batch = parse_batch_embed(
        {"requests": [{"model": "models/te3", "content": {"parts": [{"text": "x"}]}, "title": "T"}, {"content": {"parts": [{"text": "y"}]}}]},
        "te3",
        max_inputs=10,
    )
    assert batch.inputs == ("x", "y") and batch.titles == ("T", None)


@pytest.mark.parametrize(
    "body",
    [
        {"requests": []},
        {"requests": [{"model": "models/other", "content": {"parts": [{"text": "x"}]}}]},
        {"requests": [{"content": {"parts": [{"inlineData": {}}]}}]},
        {"requests": [{"content": {"parts": [{"text": "x"}]}, "taskType": "A"}, {"content": {"parts": [{"text": "y"}]}}]},
        {"requests": [{"content": {"parts": [{"text": "x"}]}, "outputDimensionality": -1}]},
        {"requests": "x"},
    ],
)
def test_gemini_bad_batches_are_400(body: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as err:
        parse_batch_embed(body, "te3", max_inputs=10)
    assert err.value.status == 400


def test_ollama_embed_body_types_are_checked() -> None:
    assert parse_body(EmbedBody, {"model": "te3", "input": ["a"], "truncate": True}).input == ["a"]
    for bad in ({"input": 3}, {"input": ["a", 1]}, {"dimensions": "8"}, {"model": 1}):
        with pytest.raises(ClientError) as err:
            parse_body(EmbedBody, bad)
        assert err.value.status == 400


# ---- catalog and config -------------------------------------------------------------------------------


def test_families_are_apart_from_chat_routes() -> None:
    catalog = Catalog(settings())
    assert [r.label for r in catalog.routes] == ["oa/chat-1"]
    assert [r.label for r in catalog.chain] == ["oa/chat-1"]
    family, routes, pinned = catalog.resolve_embedding("te3")
    assert family == "te3" and [r.label for r in routes] == ["oa/text-embedding-3-small", "gm/te3-mirror"] and not pinned
    # a member's model id names its family; a pin is the route alone; auto is the first family
    assert [r.label for r in catalog.resolve_embedding("te3-mirror")[1]] == ["oa/text-embedding-3-small", "gm/te3-mirror"]
    assert catalog.resolve_embedding("gm/te3-mirror")[1:] == ([catalog.embedding_by_label["gm/te3-mirror"]], True)
    assert catalog.resolve_embedding("auto")[0] == "te3"
    assert catalog.resolve_embedding("")[0] == "te3"
    assert catalog.resolve_embedding("nomic-embed")[0] == "nomic-embed"  # family defaults to the id


def test_unknown_or_crossed_models_are_404() -> None:
    catalog = Catalog(settings())
    for name in ("nope", "chat-1", "oa/chat-1"):
        with pytest.raises(ClientError) as err:
            catalog.resolve_embedding(name)
        assert err.value.status == 404 and err.value.code == "model_not_found"
    with pytest.raises(ClientError) as err:
        catalog.resolve("te3")
    assert err.value.status == 404 and "/v1/embeddings" in err.value.message
    with pytest.raises(ClientError):
        Catalog(Settings()).resolve_embedding("auto")


def test_default_family_setting() -> None:
    assert Catalog(settings(embeddings={"default_family": "nomic-embed"})).resolve_embedding("auto")[0] == "nomic-embed"
    with pytest.raises(ValueError, match="default_family"):
        settings(embeddings={"default_family": "missing"})


def test_config_refuses_family_on_chat_models_and_embeddings_on_anthropic() -> None:
    with pytest.raises(ValueError, match="embedding models only"):
        Settings.model_validate({"providers": [{"name": "a", "base_url": "http://x", "models": [{"id": "m", "family": "f"}]}]})
    with pytest.raises(ValueError, match="no embeddings"):
        Settings.model_validate(
            {"providers": [{"name": "a", "kind": "anthropic", "base_url": "http://x", "models": [{"id": "m", "kind": "embedding"}]}]}
        )
