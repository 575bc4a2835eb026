"""OpenAI Chat Completions surface: the canonical wire, so rendering is framing.

Parsing is :func:`freellm.core.request.parse_chat_request`; this module turns canonical chunks into SSE
frames, a finished turn into a ``chat.completion``, and errors into OpenAI's envelope (in-band after
commit: one ``stream_error`` frame, then ``[DONE]``).
"""

from __future__ import annotations

from typing import Any

import orjson

from freellm.core.accumulate import completion_body
from freellm.core.chunks import Chunk
from freellm.engine.context import TurnOutcome

__all__ = ["ChatRenderer", "FusionChatRenderer", "chat_completion_body"]

_DONE = b"data: [DONE]\n\n"


class ChatRenderer:
    """Renders canonical chunks as ``chat.completion.chunk`` SSE frames."""

    content_type = "text/event-stream"

    def chunks(self, chunks: list[Chunk]) -> bytes:
        dumps = orjson.dumps
        return b"".join([b"data: " + dumps(c) + b"\n\n" for c in chunks])

    def stream_error(self, provider: str, message: str) -> bytes:
        frame: dict[str, Any] = {
            "error": {"message": f"Provider error ({provider}): stream interrupted: {message}", "type": "stream_error"}
        }
        return b"data: " + orjson.dumps(frame) + b"\n\n" + _DONE

    def done(self) -> bytes:
        return _DONE


class FusionChatRenderer(ChatRenderer):
    """The ``fusion`` model's chat stream: every chunk under one id with ``model: "fusion"``, and the
    panel's progress as additive chunks (``delta: {}`` plus ``_fusion``) that standard clients skip."""

    def __init__(self, chunk_id: str, created: int, model: str = "fusion") -> None:
        self._base = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model}

    def chunks(self, chunks: list[Chunk]) -> bytes:
        base = self._base
        return super().chunks([{**c, **base} for c in chunks])

    def opening(self) -> bytes:
        return b""

    def progress(self, event: dict[str, Any]) -> bytes:
        chunk = {**self._base, "choices": [{"index": 0, "delta": {}, "finish_reason": None}], "_fusion": event}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"


def chat_completion_body(outcome: TurnOutcome) -> dict[str, Any]:
    """The non-stream ``chat.completion`` for a finished turn (usage estimated when upstream sent none)."""
    return completion_body(
        outcome.result,
        outcome.attempt.route.model,
        usage_fallback={
            "prompt_tokens": outcome.tokens_in,
            "completion_tokens": outcome.tokens_out,
            "total_tokens": outcome.tokens_in + outcome.tokens_out,
        },
    )
