"""OpenAI embeddings surface: ``POST /v1/embeddings`` (docs/embeddings.md).

``model`` names an embedding family (or pins ``provider/model``); ``input`` is a string, a list of
strings, or — from clients that tokenise themselves, such as LangChain's default — token ids, which
only an OpenAI-compatible member can take. ``encoding_format: base64`` (what the official SDKs ask for
by default) is little-endian float32; the vectors are always fetched as floats and encoded here, so
every member serves both formats.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm.core.embeddings import EmbeddingInput, EmbeddingRequest, vector_base64
from freellm.engine.embeddings import EmbeddingTurn
from freellm.errors import ClientError
from freellm.server.body import read_json
from freellm.server.embed_http import respond_embeddings
from freellm.server.state import GATEWAY

__all__ = ["embeddings_body", "parse_embeddings_request", "register"]

_FORMATS = ("float", "base64")
MAX_DIMENSIONS = 65536
"""No embedding model comes near this; a larger ``dimensions`` is a client bug, refused up front."""


def register(app: web.Application) -> None:
    app.router.add_post("/v1/embeddings", embeddings)


async def embeddings(request: web.Request) -> web.Response:
    body = await read_json(request)
    max_inputs = request.app[GATEWAY].settings.embeddings.max_inputs
    req = parse_embeddings_request(body, max_inputs=max_inputs)
    encoding = body.get("encoding_format") or "float"
    return await respond_embeddings(
        request, req, surface="embeddings", render=lambda turn: embeddings_body(turn, base64=encoding == "base64")
    )


def parse_embeddings_request(body: Any, *, max_inputs: int) -> EmbeddingRequest:
    """The canonical request of an OpenAI embeddings body; 400 (naming the field) for what OpenAI
    itself refuses."""
    if not isinstance(body, dict):
        raise ClientError(400, "The request body must be a JSON object.", code="invalid_request")
    model = body.get("model", "")
    if model is None:
        model = ""
    if not isinstance(model, str):
        raise ClientError(400, "`model` must be a string.", param="model", code="invalid_type")
    encoding = body.get("encoding_format")
    if encoding is not None and encoding not in _FORMATS:
        raise ClientError(
            400, "`encoding_format` must be 'float' or 'base64'.", param="encoding_format", code="invalid_value"
        )
    dimensions = body.get("dimensions")
    if dimensions is not None and (
        not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= MAX_DIMENSIONS
    ):
        raise ClientError(
            400, f"`dimensions` must be an integer from 1 to {MAX_DIMENSIONS}.", param="dimensions", code="invalid_value"
        )
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise ClientError(400, "`user` must be a string.", param="user", code="invalid_type")
    inputs = _inputs(body.get("input"), max_inputs)
    return EmbeddingRequest(model, inputs, dimensions=dimensions, user=user)


def _inputs(value: Any, max_inputs: int) -> tuple[EmbeddingInput, ...]:
    """``input``: a string, strings, token ids, or lists of token ids — never empty."""
    if value is None:
        raise ClientError(400, "`input` is required.", param="input", code="missing_required_parameter")
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list) and value and all(_is_token(t) for t in value):
        items = [value]  # one input given as token ids
    elif isinstance(value, list):
        items = value
    else:
        raise ClientError(
            400, "`input` must be a string, an array of strings, or token ids.", param="input", code="invalid_type"
        )
    if not items:
        raise ClientError(400, "`input` must not be empty.", param="input", code="invalid_value")
    if len(items) > max_inputs:
        raise ClientError(
            400, f"`input` may hold at most {max_inputs} items (got {len(items)}).", param="input", code="invalid_value"
        )
    out: list[EmbeddingInput] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise ClientError(400, f"`input[{i}]` must not be an empty string.", param="input", code="invalid_value")
            out.append(item)
        elif isinstance(item, list) and item and all(_is_token(t) for t in item):
            out.append(tuple(item))
        else:
            raise ClientError(
                400, f"`input[{i}]` must be a non-empty string or a list of token ids.", param="input", code="invalid_type"
            )
    return tuple(out)


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def embeddings_body(turn: EmbeddingTurn, *, base64: bool) -> dict[str, Any]:
    """The OpenAI ``list`` of ``embedding`` objects, ``model`` the family, ``provider`` who served it."""
    tokens = turn.outcome.tokens_in
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector_base64(v) if base64 else v}
            for i, v in enumerate(turn.answer.vectors)
        ],
        "model": turn.family,
        "provider": turn.outcome.attempt.route.provider,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
