"""Stored responses: the document kept per response, and the chain ``previous_response_id`` follows.

A stored document (``StateStore.put_response``) is::

    {"v": 1,
     "response": <the response object, exactly what GET /v1/responses/{id} returns>,
     "input":    <this turn's input items as canonical chat messages, system messages not hoisted>,
     "output":   <this turn's output as canonical chat messages (one assistant message)>}

Instructions are not part of ``input``: as with OpenAI, a response's ``instructions`` apply to that
response only and are not carried into the next one. Following a chain reads each ancestor through
``response.previous_response_id`` (at most ``max_chain_depth`` of them, newest first; a missing or
expired ancestor ends the history there) and returns ``input + output`` of each, oldest first.
"""

from __future__ import annotations

from typing import Any

from freellm.errors import ClientError
from freellm.store.base import StateStore

__all__ = ["DOC_VERSION", "load_history", "not_found", "output_messages", "stored_doc"]

DOC_VERSION = 1


def not_found(response_id: str, *, previous: bool = False) -> ClientError:
    if previous:
        return ClientError(
            404,
            f"Previous response with id '{response_id}' not found.",
            type="invalid_request_error",
            code="previous_response_not_found",
            param="previous_response_id",
        )
    return ClientError(404, f"Response with id '{response_id}' not found.", type="invalid_request_error")


def output_messages(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The assistant turn that output items stand for: text and tool calls (reasoning left out)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            texts.extend(p.get("text") or "" for p in item.get("content") or () if p.get("type") == "output_text")
        elif kind == "function_call":
            calls.append(
                {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"},
                }
            )
    text = "".join(texts)
    if not text and not calls:
        return []
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def stored_doc(response: dict[str, Any], input_messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "v": DOC_VERSION,
        "response": response,
        "input": input_messages,
        "output": output_messages(response.get("output") or []),
    }


async def load_history(
    store: StateStore, previous_id: str, *, now: float, max_depth: int
) -> list[dict[str, Any]]:
    """The conversation up to and including ``previous_id``, as canonical messages, oldest first.

    Raises a 404 :class:`ClientError` when ``previous_id`` itself is unknown (or expired).
    """
    docs: list[dict[str, Any]] = []
    seen: set[str] = set()
    rid: Any = previous_id
    while isinstance(rid, str) and rid and rid not in seen and len(docs) < max(1, max_depth):
        seen.add(rid)
        doc = await store.get_response(rid, now)
        if not _usable(doc):
            break
        assert doc is not None
        docs.append(doc)
        rid = doc["response"].get("previous_response_id")
    if not docs:
        raise not_found(previous_id, previous=True)
    history: list[dict[str, Any]] = []
    for doc in reversed(docs):
        history.extend(doc["input"])
        history.extend(doc["output"])
    return history


def _usable(doc: dict[str, Any] | None) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("response"), dict)
        and isinstance(doc.get("input"), list)
        and isinstance(doc.get("output"), list)
    )
