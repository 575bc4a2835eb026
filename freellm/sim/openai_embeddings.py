"""The OpenAI embeddings wire: ``POST /v1/embeddings`` bodies checked and answered as OpenAI does.

The body is checked strictly (an unknown field, an empty string, a mixed ``input`` array are 400s in
OpenAI's envelope, naming the field in ``param``) so a gateway that builds a bad upstream request fails
its tests instead of production. ``encoding_format: "base64"`` (what the official SDK asks for unless
told otherwise) sends each vector as base64 of little-endian float32s.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from freellm.sim.embeddings import (
    MAX_DIMENSIONS,
    EmbeddingCall,
    EmbeddingInput,
    EmbeddingRequestError,
    encode_base64,
    text_tokens,
    tokens_text,
)
from freellm.sim.openai_wire import OPENAI_WIRE, OpenAIWire
from freellm.sim.wire import WireRequestError

__all__ = ["OPENAI_EMBEDDINGS", "OpenAIEmbeddings"]

MAX_INPUTS: Final = 2048
"""OpenAI's limit on the number of inputs in one request."""
_FIELDS: Final = frozenset({"model", "input", "dimensions", "encoding_format", "user"})
_BAD_INPUT: Final = (
    "'input' must be a non-empty string, an array of non-empty strings, an array of token ids "
    "(integers >= 0) or an array of non-empty arrays of token ids"
)


def _token_array(value: Any) -> list[int] | None:
    """``value`` as a non-empty list of token ids, or None when it is not one."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        return value
    return None


def _inputs(value: Any, dimensions: int | None) -> tuple[EmbeddingInput, ...]:
    """The four shapes of ``input``: a string, strings, one token array, token arrays (never mixed)."""
    if isinstance(value, str):
        if not value:
            raise EmbeddingRequestError("'input' cannot be an empty string", "input")
        return (EmbeddingInput(value, text_tokens(value), dimensions),)
    if not isinstance(value, list) or not value:
        raise EmbeddingRequestError(_BAD_INPUT, "input")
    if len(value) > MAX_INPUTS:
        raise EmbeddingRequestError(f"'input' must have at most {MAX_INPUTS} items", "input")
    if all(isinstance(v, str) for v in value):
        if not all(value):
            raise EmbeddingRequestError("'input' cannot contain an empty string", "input")
        return tuple(EmbeddingInput(v, text_tokens(v), dimensions) for v in value)
    single = _token_array(value)
    if single is not None:
        return (EmbeddingInput(tokens_text(single), len(single), dimensions),)
    arrays = [_token_array(v) for v in value]
    if all(a is not None for a in arrays):
        return tuple(EmbeddingInput(tokens_text(a), len(a), dimensions) for a in arrays if a is not None)
    raise EmbeddingRequestError(_BAD_INPUT, "input")


class OpenAIEmbeddings:
    """Stateless reader/renderer of ``/v1/embeddings``; keys and error envelopes are the chat wire's."""

    @property
    def wire(self) -> OpenAIWire:
        """The OpenAI chat wire (bearer key, ``{"error": {...}}`` envelope)."""
        return OPENAI_WIRE

    def parse(self, body: Any, path_model: str) -> EmbeddingCall:
        """Check the body; optional fields may be ``null`` (absent), as the OpenAI API accepts."""
        if not isinstance(body, dict):
            raise EmbeddingRequestError("request body must be a JSON object")
        for name in body:
            if name not in _FIELDS:
                raise EmbeddingRequestError(f"Unrecognized request argument supplied: {name}", name)
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise EmbeddingRequestError("you must provide a model parameter", "model")
        if "input" not in body:
            raise EmbeddingRequestError("'input' is a required property", "input")
        dimensions = body.get("dimensions")
        if dimensions is not None and (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
        ):
            raise EmbeddingRequestError(
                f"'dimensions' must be an integer >= 1, got {dimensions!r}", "dimensions"
            )
        if dimensions is not None and dimensions > MAX_DIMENSIONS:
            raise EmbeddingRequestError(
                f"'dimensions' must be at most {MAX_DIMENSIONS}, got {dimensions}", "dimensions"
            )
        encoding = body.get("encoding_format")
        if encoding not in (None, "float", "base64"):
            raise EmbeddingRequestError(
                f"'encoding_format' must be 'float' or 'base64', got {encoding!r}", "encoding_format"
            )
        user = body.get("user")
        if user is not None and not isinstance(user, str):
            raise EmbeddingRequestError("'user' must be a string", "user")
        raw_input = body["input"]
        return EmbeddingCall(
            model=model,
            inputs=_inputs(raw_input, dimensions),
            match_json=lambda: orjson.dumps(raw_input).decode(),
            base64=encoding == "base64",
        )

    def render(self, call: EmbeddingCall, default_dimensions: int) -> dict[str, Any]:
        """OpenAI's ``{"object": "list", "data": [...], "model", "usage"}``."""
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": encode_base64(vector) if call.base64 else vector,
            }
            for i, vector in enumerate(call.vectors(default_dimensions))
        ]
        tokens = call.prompt_tokens
        return {
            "object": "list",
            "data": data,
            "model": call.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def render_bad_request(self, error: WireRequestError) -> dict[str, Any]:
        """The 400 envelope, with ``param`` naming the refused field."""
        body = OPENAI_WIRE.render_error(400, str(error))
        body["error"]["param"] = error.param if isinstance(error, EmbeddingRequestError) else None
        return body


OPENAI_EMBEDDINGS: Final = OpenAIEmbeddings()
"""The shared stateless instance."""
