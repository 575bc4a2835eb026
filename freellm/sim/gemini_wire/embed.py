"""Gemini's embeddings actions: ``:embedContent`` and ``:batchEmbedContents``, checked and answered.

``POST …/models/{model}:embedContent`` takes one ``{content, taskType?, title?, outputDimensionality?}``
and answers ``{"embedding": {"values": [...]}}``; ``:batchEmbedContents`` takes up to 100 such requests,
each naming ``model: "models/{model}"`` (the model of the URL, or a 400), and answers
``{"embeddings": [{"values": [...]}, ...]}`` in order. As for ``generateContent``, fields are read under
their camelCase and snake_case spellings, anything unknown is refused with Google's wording and errors
use the ``google.rpc.Status`` envelope (:mod:`.errors`), so a gateway translating to this wire is held to
what the real API accepts. A content's vector is that of its parts' text, concatenated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.sim.embeddings import (
    MAX_DIMENSIONS,
    EmbeddingCall,
    EmbeddingInput,
    EmbeddingRequestError,
    text_tokens,
)
from freellm.sim.gemini_wire.errors import error_body
from freellm.sim.gemini_wire.fields import field_of, unknown_field
from freellm.sim.gemini_wire.wire import GEMINI_UNARY_WIRE, GeminiWire
from freellm.sim.wire import WireRequestError

__all__ = ["GEMINI_EMBED_ACTIONS", "MAX_BATCH", "GeminiBatchEmbed", "GeminiEmbed", "embed_dialect_for_action"]

MAX_BATCH: Final = 100
"""Gemini's limit on the requests of one ``batchEmbedContents`` call."""
_REQUEST_FIELDS: Final = frozenset(
    {
        "model",
        "content",
        "taskType",
        "task_type",
        "title",
        "outputDimensionality",
        "output_dimensionality",
    }
)
_TASK_TYPES: Final = frozenset(
    {
        "TASK_TYPE_UNSPECIFIED",
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    }
)


def _invalid(message: str, path: str, why: str) -> EmbeddingRequestError:
    """Google's constraint-failure wording: ``* <RequestMessage>.<path>: <why>``."""
    return EmbeddingRequestError(f"* {message}.{path}: {why}", path)


def _check_model(value: Any, path_model: str, message: str, at: str) -> None:
    """A request's ``model`` must name the model of the URL (``models/`` prefix, as Gemini spells it)."""
    expected = f"models/{path_model}"
    if value != expected:
        raise _invalid(message, f"{at}model", f"must be {expected!r}, the model of the request URL")


def _read_request(request: Any, message: str, at: str, path_model: str, need_model: bool) -> EmbeddingInput:
    """One ``EmbedContentRequest`` (``at``: its path prefix inside a batch, ``""`` alone)."""
    where = at.rstrip(".") or None
    if not isinstance(request, dict):
        raise EmbeddingRequestError(f"Invalid value at '{where}': expected an object")
    for key in request:
        if key not in _REQUEST_FIELDS:
            raise unknown_field(key, where)
    if need_model or "model" in request:
        _check_model(request.get("model"), path_model, message, at)
    task = field_of(request, "taskType", "task_type")
    if task is not None and task not in _TASK_TYPES:
        raise EmbeddingRequestError(
            f"Invalid value at '{at}task_type' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), "{task}"',
            f"{at}task_type",
        )
    title = request.get("title")
    if title is not None and not isinstance(title, str):
        raise EmbeddingRequestError(f"Invalid value at '{at}title': expected a string", f"{at}title")
    dimensions = field_of(request, "outputDimensionality", "output_dimensionality")
    if dimensions is not None and (
        isinstance(dimensions, bool)
        or not isinstance(dimensions, int)
        or not 1 <= dimensions <= MAX_DIMENSIONS
    ):
        raise _invalid(
            message,
            f"{at}output_dimensionality",
            f"output dimensionality must be an integer between 1 and {MAX_DIMENSIONS}, got {dimensions!r}",
        )
    text = _content_text(request.get("content"), message, f"{at}content")
    return EmbeddingInput(text, text_tokens(text), dimensions)


def _content_text(content: Any, message: str, at: str) -> str:
    """The text of a ``Content`` of text parts (the only kind the embedding models take here)."""
    if content is None:
        raise _invalid(message, at, "content is not specified")
    if not isinstance(content, dict):
        raise EmbeddingRequestError(f"Invalid value at '{at}': expected an object")
    for key in content:
        if key not in ("parts", "role"):
            raise unknown_field(key, at)
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _invalid(message, f"{at}.parts", "contents.parts must not be empty.")
    texts: list[str] = []
    for j, part in enumerate(parts):
        where = f"{at}.parts[{j}]"
        if not isinstance(part, dict):
            raise EmbeddingRequestError(f"Invalid value at '{where}': expected an object")
        if set(part) != {"text"}:
            raise _invalid(message, where, "only text parts are supported for embeddings")
        text = part["text"]
        if not isinstance(text, str):
            raise EmbeddingRequestError(f"Invalid value at '{where}.text': expected a string")
        if not text:
            raise _invalid(message, f"{where}.text", "text must not be empty")
        texts.append(text)
    return "".join(texts)


class _GeminiEmbedBase:
    """What both actions share: the Gemini wire's key and envelopes, and the 400 body."""

    @property
    def wire(self) -> GeminiWire:
        """The Gemini chat wire (``x-goog-api-key``, ``google.rpc.Status`` envelopes)."""
        return GEMINI_UNARY_WIRE

    def render_bad_request(self, error: WireRequestError) -> dict[str, Any]:
        """A 400 ``INVALID_ARGUMENT``."""
        return error_body(400, str(error), None)


class GeminiEmbed(_GeminiEmbedBase):
    """``:embedContent``: one content, one vector."""

    def parse(self, body: Any, path_model: str) -> EmbeddingCall:
        """Check an ``EmbedContentRequest`` (its optional ``model`` must be the URL's)."""
        if not isinstance(body, dict):
            raise EmbeddingRequestError("Invalid JSON payload received. Expected an object.")
        item = _read_request(body, "EmbedContentRequest", "", path_model, need_model=False)
        return EmbeddingCall(
            model=path_model,
            inputs=(item,),
            match_json=lambda: orjson.dumps(body.get("content")).decode(),
        )

    def render(self, call: EmbeddingCall, default_dimensions: int) -> dict[str, Any]:
        """``{"embedding": {"values": [...]}}``."""
        [vector] = call.vectors(default_dimensions)
        return {"embedding": {"values": vector}}


class GeminiBatchEmbed(_GeminiEmbedBase):
    """``:batchEmbedContents``: up to :data:`MAX_BATCH` requests, one vector each, in order."""

    def parse(self, body: Any, path_model: str) -> EmbeddingCall:
        """Check a ``BatchEmbedContentsRequest``: a non-empty list of at most 100 requests for the URL's
        model."""
        message = "BatchEmbedContentsRequest"
        if not isinstance(body, dict):
            raise EmbeddingRequestError("Invalid JSON payload received. Expected an object.")
        for key in body:
            if key != "requests":
                raise unknown_field(key)
        requests = body.get("requests")
        if requests is None:
            raise _invalid(message, "requests", "requests is not specified")
        if not isinstance(requests, list):
            raise EmbeddingRequestError("Invalid value at 'requests': expected a list", "requests")
        if not requests:
            raise _invalid(message, "requests", "at least one request is required")
        if len(requests) > MAX_BATCH:
            raise _invalid(message, "requests", f"at most {MAX_BATCH} requests can be in one batch")
        inputs = tuple(
            _read_request(r, message, f"requests[{i}].", path_model, need_model=True)
            for i, r in enumerate(requests)
        )
        return EmbeddingCall(
            model=path_model,
            inputs=inputs,
            match_json=lambda: orjson.dumps([r.get("content") for r in requests]).decode(),
        )

    def render(self, call: EmbeddingCall, default_dimensions: int) -> dict[str, Any]:
        """``{"embeddings": [{"values": [...]}, ...]}``."""
        return {"embeddings": [{"values": v} for v in call.vectors(default_dimensions)]}


GEMINI_EMBED: Final = GeminiEmbed()
GEMINI_BATCH_EMBED: Final = GeminiBatchEmbed()
GEMINI_EMBED_ACTIONS: Final[Mapping[str, GeminiEmbed | GeminiBatchEmbed]] = {
    "embedContent": GEMINI_EMBED,
    "batchEmbedContents": GEMINI_BATCH_EMBED,
}


def embed_dialect_for_action(action: str) -> GeminiEmbed | GeminiBatchEmbed | None:
    """The embeddings dialect for ``:embedContent`` / ``:batchEmbedContents`` (None: not an embed action)."""
    return GEMINI_EMBED_ACTIONS.get(action)
