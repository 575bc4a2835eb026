"""Message, tool-call and tool models of the canonical chat request.

The shapes are the lenient agent shapes that real clients send (spec/core.md §1.5): content is a string
or an array of parts/strings; an assistant turn may carry null content, tool calls and
``reasoning_content``; a tool result may lack content and ``tool_call_id``; the legacy ``function`` role
needs a ``name``. Unknown fields on every object are allowed and kept, so nothing a client sends is lost.

Every model is frozen: the request is validated once and shared by every attempt of the fallback loop.
Normalisation (:func:`normalise_messages`) never mutates a model; it builds copies where something changes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Discriminator, PlainValidator, Tag
from pydantic_core import PydanticCustomError

__all__ = [
    "AssistantMessage",
    "Content",
    "FunctionCall",
    "FunctionMessage",
    "Message",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolFunction",
    "ToolMessage",
    "UserMessage",
    "WireModel",
    "content_stats",
    "normalise_messages",
]

Content = str | list[dict[str, Any]]
"""Normalised content: a string, or a list of part objects (bare strings become text parts)."""

AUTO_CALL_PREFIX = "call_auto_"


def _content(value: Any) -> Content:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(p, dict) for p in value):
            return value
        parts: list[dict[str, Any]] = []
        for i, p in enumerate(value):
            if isinstance(p, dict):
                parts.append(p)
            elif isinstance(p, str):
                parts.append({"type": "text", "text": p})
            else:
                raise PydanticCustomError(
                    "content_part", "Content part {index} should be a string or an object", {"index": i}
                )
        return parts
    raise PydanticCustomError("content_type", "Input should be a string or an array of content parts")


def _nullable_content(value: Any) -> Content | None:
    return None if value is None else _content(value)


def _function_type(value: Any) -> Literal["function"]:
    # Tools and tool calls are always functions; a missing/null/other string type is normalised.
    if value is None or isinstance(value, str):
        return "function"
    raise PydanticCustomError("string_type", "Input should be a string")


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "{}"
    if isinstance(value, dict):
        try:
            return orjson.dumps(value).decode()
        except (TypeError, ValueError) as exc:
            raise PydanticCustomError("arguments", "Arguments object is not serialisable as JSON") from exc
    raise PydanticCustomError("arguments_type", "Input should be a string or an object")


RequiredContent = Annotated[Content, PlainValidator(_content)]
NullableContent = Annotated[Content | None, PlainValidator(_nullable_content)]
FunctionType = Annotated[Literal["function"], PlainValidator(_function_type)]


class WireModel(BaseModel):
    """Base of the request's sub-objects: strict, frozen, unknown fields kept, ``wire()`` for upstream."""

    model_config = ConfigDict(
        extra="allow", strict=True, frozen=True, allow_inf_nan=False, hide_input_in_errors=True
    )

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict sent upstream: set fields, then extras; ``None`` dropped.

        Built by hand (not ``model_dump``) so nested client values (parts, schemas) are shared rather
        than deep-copied: the result must be treated as read-only.
        """
        d = {k: v for k, v in self.__dict__.items() if v is not None}
        extra = self.__pydantic_extra__
        if extra:
            for k, v in extra.items():
                if v is not None:
                    d[k] = v
        return d


class FunctionCall(WireModel):
    name: str
    arguments: Annotated[str, PlainValidator(_arguments)] = "{}"
    """Always a string: an object is serialised to compact JSON."""


class ToolCall(WireModel):
    id: str | None = None
    type: FunctionType = "function"
    function: FunctionCall

    def wire(self) -> dict[str, Any]:
        d = super().wire()
        d["function"] = self.function.wire()
        return d


class ToolFunction(WireModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(WireModel):
    type: FunctionType = "function"
    function: ToolFunction

    def wire(self) -> dict[str, Any]:
        d = super().wire()
        d["function"] = self.function.wire()
        return d


class SystemMessage(WireModel):
    role: Literal["system", "developer"]
    content: RequiredContent
    name: str | None = None


class UserMessage(WireModel):
    role: Literal["user"]
    content: RequiredContent
    name: str | None = None


class AssistantMessage(WireModel):
    role: Literal["assistant"]
    content: NullableContent = None
    tool_calls: list[ToolCall] | None = None
    reasoning_content: str | None = None
    name: str | None = None

    def wire(self) -> dict[str, Any]:
        d = super().wire()
        if self.tool_calls:
            d["tool_calls"] = [c.wire() for c in self.tool_calls]
            if "content" not in d:
                d["content"] = None  # several upstreams want the key present next to tool_calls
        return d


class ToolMessage(WireModel):
    role: Literal["tool"]
    content: NullableContent = None
    tool_call_id: str | None = None
    name: str | None = None


class FunctionMessage(WireModel):
    role: Literal["function"]
    name: str
    content: NullableContent = None


_ROLE_TAG = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "function",
}
ROLE_TAGS = frozenset(_ROLE_TAG.values())
ROLES = tuple(_ROLE_TAG)


def _role_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        role = value.get("role")
        return _ROLE_TAG.get(role) if isinstance(role, str) else None
    if isinstance(value, BaseModel):
        role = getattr(value, "role", None)
        return _ROLE_TAG.get(role) if isinstance(role, str) else None
    return None


Message = Annotated[
    Annotated[SystemMessage, Tag("system")]
    | Annotated[UserMessage, Tag("user")]
    | Annotated[AssistantMessage, Tag("assistant")]
    | Annotated[ToolMessage, Tag("tool")]
    | Annotated[FunctionMessage, Tag("function")],
    Discriminator(_role_tag, custom_error_type="invalid_role", custom_error_message="Invalid role"),
]
"""One message, chosen by ``role``. After normalisation only system/user/assistant/tool remain."""


def normalise_messages(messages: list[Any]) -> list[Any]:
    """Apply the §1.6 message normalisations; returns ``messages`` itself when nothing changes.

    developer→system; function→tool; tool calls get ``type:"function"`` (done by validation) and an id
    ``call_auto_N`` when they have none; a tool result without ``tool_call_id`` is paired with the oldest
    unanswered call (FIFO); an assistant turn without tool calls and with null/empty content gets ``""``;
    a null or empty ``tool_calls`` is dropped; a null tool-result content becomes ``""``.
    """
    out: list[Any] | None = None
    pending: deque[str] = deque()
    taken: set[str] | None = None
    auto_n = 0
    for i, msg in enumerate(messages):
        new = msg
        if isinstance(msg, AssistantMessage):
            calls = msg.tool_calls
            if calls:
                fixed: list[ToolCall] | None = None
                for j, call in enumerate(calls):
                    if not call.id:
                        if taken is None:
                            taken = _client_call_ids(messages)
                        while f"{AUTO_CALL_PREFIX}{auto_n}" in taken:
                            auto_n += 1
                        call_id = f"{AUTO_CALL_PREFIX}{auto_n}"
                        auto_n += 1
                        if fixed is None:
                            fixed = list(calls)
                        fixed[j] = call.model_copy(update={"id": call_id})
                    else:
                        call_id = call.id
                    pending.append(call_id)
                if fixed is not None:
                    new = msg.model_copy(update={"tool_calls": fixed})
            elif calls is not None or not msg.content:
                update: dict[str, Any] = {"tool_calls": None}
                if not msg.content:
                    update["content"] = ""
                new = msg.model_copy(update=update)
        elif isinstance(msg, ToolMessage):
            update = {}
            if not msg.tool_call_id:
                if pending:
                    update["tool_call_id"] = pending.popleft()
            elif msg.tool_call_id in pending:
                pending.remove(msg.tool_call_id)
            if msg.content is None:
                update["content"] = ""
            if update:
                new = msg.model_copy(update=update)
        elif isinstance(msg, FunctionMessage):
            fields: dict[str, Any] = {"role": "tool", "content": "" if msg.content is None else msg.content}
            if pending:
                fields["tool_call_id"] = pending.popleft()
            fields["name"] = msg.name
            if msg.model_extra:
                fields = {**msg.model_extra, **fields}
            new = ToolMessage.model_construct(**fields)
        elif isinstance(msg, SystemMessage) and msg.role == "developer":
            new = msg.model_copy(update={"role": "system"})
        if new is not msg:
            if out is None:
                out = list(messages)
            out[i] = new
    return messages if out is None else out


def _client_call_ids(messages: Iterable[Any]) -> set[str]:
    ids: set[str] = set()
    for m in messages:
        if isinstance(m, AssistantMessage) and m.tool_calls:
            ids.update(c.id for c in m.tool_calls if c.id)
        elif isinstance(m, ToolMessage) and m.tool_call_id:
            ids.add(m.tool_call_id)
    return ids


def content_stats(content: Content | None) -> tuple[int, int]:
    """(Σ ceil(len/4) over text blocks, number of image parts) of one message's content (spec §9)."""
    if content is None:
        return 0, 0
    if isinstance(content, str):
        return (len(content) + 3) // 4, 0
    tokens = images = 0
    for part in content:
        kind = part.get("type")
        if kind == "image_url" or kind == "image":  # equality, not `in`: a garbage type may be unhashable
            images += 1
        else:
            text = part.get("text")
            if isinstance(text, str):
                tokens += (len(text) + 3) // 4
    return tokens, images
