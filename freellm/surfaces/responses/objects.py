"""The Responses API objects: the ``response`` envelope, its output items and its usage.

One set of builders serves the non-stream body, every lifecycle event of a stream and the stored
document, so an id minted for an item while streaming is the id ``response.completed``, ``GET`` and the
next turn's chain all see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from freellm.core.tokens import estimate_text_tokens
from freellm.engine.pump import PumpResult
from freellm.surfaces.responses.ids import IdFactory

__all__ = [
    "ItemStatus",
    "ResponseShell",
    "end_status",
    "function_call_item",
    "message_item",
    "output_from_result",
    "output_text",
    "reasoning_item",
    "usage_object",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
ResponseStatus = Literal["in_progress", "completed", "incomplete", "failed"]

_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


@dataclass(slots=True)
class ResponseShell:
    """What a response object takes from its request, fixed before the turn runs.

    ``echo`` holds the request parameters the object reports back (``tools``, ``tool_choice``,
    ``temperature``…), already in their response-object form.
    """

    id: str
    created_at: int
    model: str
    instructions: str | None = None
    previous_response_id: str | None = None
    store: bool = True
    echo: dict[str, Any] = field(default_factory=dict)

    def build(
        self,
        status: ResponseStatus,
        output: list[dict[str, Any]],
        *,
        usage: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        incomplete_reason: str | None = None,
    ) -> dict[str, Any]:
        echo = self.echo
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
            "instructions": self.instructions,
            "max_output_tokens": echo.get("max_output_tokens"),
            "model": self.model,
            "output": output,
            "output_text": output_text(output),
            "parallel_tool_calls": echo.get("parallel_tool_calls", True),
            "previous_response_id": self.previous_response_id,
            "reasoning": echo.get("reasoning", {"effort": None, "summary": None}),
            "store": self.store,
            "temperature": echo.get("temperature"),
            "text": echo.get("text", {"format": {"type": "text"}}),
            "tool_choice": echo.get("tool_choice", "auto"),
            "tools": echo.get("tools", []),
            "top_p": echo.get("top_p"),
            "truncation": echo.get("truncation", "disabled"),
            "usage": usage,
            "user": echo.get("user"),
            "metadata": echo.get("metadata", {}),
        }


def end_status(finish_reason: str | None) -> tuple[ResponseStatus, str | None]:
    """(status, incomplete reason) of a turn that ended cleanly with ``finish_reason``."""
    reason = _INCOMPLETE_REASONS.get(finish_reason or "")
    return ("incomplete", reason) if reason else ("completed", None)


# ---- output items --------------------------------------------------------------------------------


def message_item(item_id: str, text: str | None, status: ItemStatus) -> dict[str, Any]:
    """An assistant message; ``text=None`` gives the empty shell of ``response.output_item.added``."""
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def reasoning_item(item_id: str, text: str | None, status: ItemStatus) -> dict[str, Any]:
    """A reasoning item carrying the model's raw reasoning as one ``reasoning_text`` part."""
    content = [] if text is None else [{"type": "reasoning_text", "text": text}]
    return {"id": item_id, "type": "reasoning", "status": status, "summary": [], "content": content}


def function_call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: ItemStatus
) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def output_text(output: list[dict[str, Any]]) -> str:
    """The SDKs' ``output_text``: every ``output_text`` part of every message item, concatenated."""
    parts: list[str] = []
    for item in output:
        if item.get("type") == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    parts.append(part.get("text") or "")
    return "".join(parts)


def output_from_result(result: PumpResult, ids: IdFactory) -> list[dict[str, Any]]:
    """The output items of a finished (non-stream) turn: reasoning, then the message, then each call."""
    status, _ = end_status(result.finish_reason)
    items: list[dict[str, Any]] = []
    if result.reasoning:
        items.append(reasoning_item(ids("rs"), result.reasoning, "completed"))
    if result.text:
        items.append(message_item(ids("msg"), result.text, "incomplete" if status == "incomplete" else "completed"))
    for call in result.tool_calls:
        items.append(function_call_item(ids("fc"), call.id, call.name, call.arguments, "completed"))
    return items


# ---- usage -----------------------------------------------------------------------------------------


def usage_object(
    usage: dict[str, Any] | None,
    *,
    input_estimate: int,
    output_estimate: int,
    reasoning_chars: int = 0,
) -> dict[str, Any]:
    """The Responses ``usage`` from a chat usage record, estimates filling what the upstream left out.

    A ``prompt_tokens`` of 0 is the pump's own estimate marker (no upstream usage), never a real count.
    """
    usage = usage or {}
    prompt = _count(usage.get("prompt_tokens")) or input_estimate
    completion = _count(usage.get("completion_tokens"))
    if completion is None:
        completion = output_estimate
    prompt_details = usage.get("prompt_tokens_details")
    cached = _count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    completion_details = usage.get("completion_tokens_details")
    reasoning = (
        _count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else None
    )
    if reasoning is None:
        reasoning = estimate_text_tokens(reasoning_chars)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached or 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": min(reasoning, completion) if completion else reasoning},
        "total_tokens": prompt + completion,
    }


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
