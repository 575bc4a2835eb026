"""Canonical stream chunks: ``chat.completion.chunk``-shaped dicts.

Chunks stay plain dicts (parsed once with orjson, re-serialised once) so the OpenAI-to-OpenAI path is
nearly a pass-through; the TypedDicts below document the shape for readers and type checkers.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

MARKER_KEY = "x_freellm"
"""A chunk's gateway-added facts (``{continued_from, continued_on}`` on the finish chunk of a continued
stream): chat clients see the key on that chunk; the Messages and Responses renderers move it to their
``message_delta`` and final response object."""


class FunctionDelta(TypedDict, total=False):
    name: str
    arguments: str


class ToolCallDelta(TypedDict, total=False):
    index: int
    id: str
    type: Literal["function"]
    function: FunctionDelta


class Delta(TypedDict, total=False):
    role: str
    content: str | None
    reasoning_content: str | None
    reasoning: str | None
    reasoning_signature: str
    """The upstream's signature over the turn's reasoning (Anthropic ``signature_delta``, a Gemini
    thought part's ``thoughtSignature``); usually on a chunk of its own. Never text: an empty string
    marks the turn's reasoning as not replayable (see ``PumpResult.reasoning_signature``)."""
    tool_calls: list[ToolCallDelta] | None


class Choice(TypedDict):
    index: int
    delta: Delta
    finish_reason: str | None


class Usage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[Choice]
    usage: NotRequired[Usage | None]


# Chunks from upstreams are only ever *shaped* like ChatChunk; code that handles them treats them as dicts.
Chunk = dict[str, Any]


def make_chunk(
    chunk_id: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
) -> Chunk:
    """Build one synthetic chunk (our own framing: finish chunk, tool-call chunk, held text)."""
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def make_usage_chunk(chunk_id: str, created: int, model: str, usage: dict[str, Any]) -> Chunk:
    """The usage-only frame, emitted once after the finish chunk."""
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }


def read_chunk(chunk: Chunk) -> tuple[dict[str, Any] | None, str | None, dict[str, Any] | None]:
    """A canonical chunk's ``(delta, finish_reason, usage)``, each None when absent or malformed — what
    every stream renderer reads first."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        usage = None
    choices = chunk.get("choices")
    if not choices or not isinstance(choices[0], dict):
        return None, None, usage
    choice = choices[0]
    finish = choice.get("finish_reason")
    delta = choice.get("delta")
    return (
        delta if isinstance(delta, dict) else None,
        finish if isinstance(finish, str) and finish else None,
        usage,
    )
