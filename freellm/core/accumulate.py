"""Fold a finished turn into one ``chat.completion`` object (the non-stream reply)."""

from __future__ import annotations

from typing import Any

from freellm.engine.pump import PumpResult

__all__ = ["completion_body"]


def completion_body(result: PumpResult, model: str, *, usage_fallback: dict[str, int]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.text or None}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
        if result.reasoning_signature:
            # An extra field (as in the stream's deltas): a chat client that sends the message back
            # as it got it gives an Anthropic or Gemini upstream its signed reasoning again.
            message["reasoning_signature"] = result.reasoning_signature
    if result.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in result.tool_calls
        ]
    elif message["content"] is None:
        message["content"] = ""
    return {
        "id": result.chunk_id,
        "object": "chat.completion",
        "created": result.created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason, "logprobs": None}],
        "usage": result.usage or usage_fallback,
    }
