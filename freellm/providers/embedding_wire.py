"""Embeddings on the two upstream wires that have them: pure request builders and answer readers.

* OpenAI (and every OpenAI-compatible server): ``POST {base}/embeddings`` with ``input`` as a list and
  ``dimensions`` when asked; vectors are always requested as floats (``encoding_format: float``) so the
  gateway can re-encode them for the client — a server that answers base64 anyway is decoded.
* Gemini: ``POST {base}/models/{model}:batchEmbedContents`` with one request per input (at most
  :data:`GEMINI_BATCH_MAX` per call, the API's limit) and ``outputDimensionality``; Gemini reports no
  token usage.

A reply whose shape is wrong (not JSON, a vector missing, not numbers, the wrong count) is an
``UpstreamError`` — a retryable failure the loop fails over on, never a half answer to the client.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping
from typing import Any

import orjson

from freellm.core.embeddings import EmbeddingAnswer, EmbeddingRequest
from freellm.errors import UpstreamError

__all__ = [
    "GEMINI_BATCH_MAX",
    "gemini_batch_body",
    "gemini_embedding_answer",
    "openai_embedding_answer",
    "openai_embedding_body",
]

GEMINI_BATCH_MAX = 100
"""``batchEmbedContents`` takes at most this many requests per call."""


def openai_embedding_body(req: EmbeddingRequest, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "input": [i if isinstance(i, str) else list(i) for i in req.inputs],
        "encoding_format": "float",
    }
    if req.dimensions is not None:
        body["dimensions"] = req.dimensions
    if req.user is not None:
        body["user"] = req.user
    return body


def openai_embedding_answer(raw: bytes, count: int, headers: Mapping[str, str] | None) -> EmbeddingAnswer:
    """The vectors of an OpenAI ``/embeddings`` reply, in input order (``data[].index``)."""
    body = _json_object(raw)
    data = body.get("data")
    if not isinstance(data, list) or len(data) != count:
        raise UpstreamError(f"malformed upstream embeddings: expected {count} vectors")
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise UpstreamError("malformed upstream embeddings: an entry is not an object")
        index = item.get("index", position)
        if not isinstance(index, int) or not 0 <= index < count or vectors[index] is not None:
            raise UpstreamError("malformed upstream embeddings: bad or repeated index")
        vectors[index] = _vector(item.get("embedding"))
    usage = body.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return EmbeddingAnswer(
        [v for v in vectors if v is not None],
        tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
        headers,
    )


def gemini_batch_body(req: EmbeddingRequest, model: str, start: int, texts: list[str]) -> dict[str, Any]:
    """One ``batchEmbedContents`` body for ``texts``: the request's inputs from index ``start`` on."""
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    requests: list[dict[str, Any]] = []
    for offset, text in enumerate(texts, start):
        item: dict[str, Any] = {"model": name, "content": {"parts": [{"text": text}]}}
        if req.task_type is not None:
            item["taskType"] = req.task_type
        title = req.titles[offset] if offset < len(req.titles) else None
        if title is not None:
            item["title"] = title
        if req.dimensions is not None:
            item["outputDimensionality"] = req.dimensions
        requests.append(item)
    return {"requests": requests}


def gemini_embedding_answer(raw: bytes, count: int) -> list[list[float]]:
    """The vectors of a ``batchEmbedContents`` reply (``embeddings[].values``)."""
    body = _json_object(raw)
    items = body.get("embeddings")
    if not isinstance(items, list) or len(items) != count:
        raise UpstreamError(f"malformed upstream embeddings: expected {count} vectors")
    return [_vector(item.get("values") if isinstance(item, dict) else None) for item in items]


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamError("malformed upstream embeddings: not JSON") from exc
    if not isinstance(body, dict):
        raise UpstreamError("malformed upstream embeddings: not an object")
    return body


def _vector(value: Any) -> list[float]:
    if isinstance(value, str):  # base64 float32, from a server that ignored encoding_format
        try:
            packed = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise UpstreamError("malformed upstream embeddings: bad base64 vector") from exc
        if not packed or len(packed) % 4:
            raise UpstreamError("malformed upstream embeddings: bad base64 vector")
        return list(struct.unpack(f"<{len(packed) // 4}f", packed))
    if not isinstance(value, list) or not value:
        raise UpstreamError("malformed upstream embeddings: a vector is missing")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        raise UpstreamError("malformed upstream embeddings: a vector holds something other than numbers")
    return [float(x) for x in value]
