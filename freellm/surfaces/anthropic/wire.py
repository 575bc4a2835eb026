"""The Anthropic Messages request wire, validated with its own models (spec/surfaces.md §2).

The models are deliberately lenient where real clients are (unknown fields and block types are accepted
and ignored, ``cache_control`` anywhere, any ``thinking.type``, a ``system`` role inside ``messages``) and
strict where a wrong value would otherwise reach the upstream (types, ranges). Validation errors become
one 400 ``invalid_request_error`` naming the Anthropic path, e.g. ``messages.0.content.1.text``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag
from pydantic_core import ErrorDetails

from freellm.core.request import Int
from freellm.core.validation import error_path, friendly_message, validate_body

__all__ = [
    "Block",
    "DocumentBlock",
    "ImageBlock",
    "MessageParam",
    "MessagesRequest",
    "OtherBlock",
    "OutputConfigParam",
    "TextBlock",
    "ThinkingParam",
    "ToolChoiceParam",
    "ToolParam",
    "ToolResultBlock",
    "ToolUseBlock",
    "parse_messages_request",
]



class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="allow", strict=True, frozen=True, allow_inf_nan=False, hide_input_in_errors=True
    )


# ---- content blocks --------------------------------------------------------------------------------


class TextBlock(_Wire):
    type: Literal["text"]
    text: str


class ImageBlock(_Wire):
    type: Literal["image"]
    source: dict[str, Any]
    """``{type: base64, media_type, data}`` or ``{type: url, url}``; checked when it is translated."""


class DocumentBlock(_Wire):
    type: Literal["document"]
    source: dict[str, Any]
    title: str | None = None


class ToolUseBlock(_Wire):
    type: Literal["tool_use"]
    id: str
    name: str
    input: Any = None


class OtherBlock(_Wire):
    """Any other block type: accepted. Signed ``thinking`` and ``redacted_thinking`` blocks of assistant
    turns are read from the extras by the mapping (kept as canonical reasoning); server tool blocks and
    the rest are not forwarded."""

    type: str


def _block_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type")
        if isinstance(kind, str):
            return _BLOCK_TAGS.get(kind, "<other>")
    return None


_BLOCK_TAGS = {
    "text": "<text>",
    "image": "<image>",
    "document": "<document>",
    "tool_use": "<tool_use>",
    "tool_result": "<tool_result>",
}


def _content_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "<str>"
    if isinstance(value, list):
        return "<blocks>"
    return None


def _result_tag(value: Any) -> str | None:
    return "<object>" if isinstance(value, dict) else _content_tag(value)


class ToolResultBlock(_Wire):
    type: Literal["tool_result"]
    tool_use_id: str
    content: (
        Annotated[
            Annotated[str, Tag("<str>")]
            | Annotated[list[Block], Tag("<blocks>")]
            | Annotated[dict[str, Any], Tag("<object>")],
            Discriminator(
                _result_tag,
                custom_error_type="content_type",
                custom_error_message="Input should be a string or an array of content blocks",
            ),
        ]
        | None
    ) = None
    is_error: bool | None = None


Block = Annotated[
    Annotated[TextBlock, Tag("<text>")]
    | Annotated[ImageBlock, Tag("<image>")]
    | Annotated[DocumentBlock, Tag("<document>")]
    | Annotated[ToolUseBlock, Tag("<tool_use>")]
    | Annotated[ToolResultBlock, Tag("<tool_result>")]
    | Annotated[OtherBlock, Tag("<other>")],
    Discriminator(
        _block_tag,
        custom_error_type="block_type",
        custom_error_message="Input should be a content block object with a string `type`",
    ),
]

Content = Annotated[
    Annotated[str, Tag("<str>")] | Annotated[list[Block], Tag("<blocks>")],
    Discriminator(
        _content_tag,
        custom_error_type="content_type",
        custom_error_message="Input should be a string or an array of content blocks",
    ),
]


# ---- messages and request ----------------------------------------------------------------------------


class MessageParam(_Wire):
    role: Literal["user", "assistant", "system"]
    content: Content


class ToolParam(_Wire):
    name: str
    type: str | None = None
    """Absent or ``custom`` for client tools; server tools (``web_search_20250305``…) are dropped."""
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class ToolChoiceParam(_Wire):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingParam(_Wire):
    type: str
    budget_tokens: Int | None = None


class OutputConfigParam(_Wire):
    effort: str | None = None
    """``low``/``medium``/``high``/``xhigh``/``max``: used as ``reasoning_effort`` when ``thinking`` sets none."""
    format: dict[str, Any] | None = None
    """``{type: "json_schema", schema}`` → ``response_format``."""


class MessagesRequest(_Wire):
    """A ``POST /v1/messages`` (or ``count_tokens``) body. Unknown fields are accepted and ignored."""

    model: str | None = None
    messages: list[MessageParam] = Field(min_length=1)
    system: Content | None = None
    max_tokens: Int | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Annotated[Int, Field(ge=0)] | None = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoiceParam | None = None
    thinking: ThinkingParam | None = None
    output_config: OutputConfigParam | None = None
    metadata: dict[str, Any] | None = None


ToolResultBlock.model_rebuild()


# ---- errors ------------------------------------------------------------------------------------------

def _describe(err: ErrorDetails) -> tuple[str, str]:
    # Discriminator tags ("<text>", "<blocks>"…) are ours, not the client's: drop them from the path.
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("<"))]
    msg = err["msg"] if err["type"] == "literal_error" else friendly_message(err)
    return error_path(loc), msg


def parse_messages_request(body: object) -> MessagesRequest:
    """Validate a decoded JSON body. Raises :class:`ClientError` (400) and nothing else."""
    return validate_body(MessagesRequest, body, _describe)
