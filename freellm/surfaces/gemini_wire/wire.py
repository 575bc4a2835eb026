"""The Gemini ``generateContent`` request wire, validated with its own models (spec/surfaces.md §3a).

Field names are accepted in both of the spellings Google's JSON parser accepts — ``lowerCamelCase``
(``inlineData``, what the SDKs and Gemini CLI send) and the proto's ``snake_case`` (``inline_data``).
The models are lenient where real clients are (unknown fields and part kinds are accepted and ignored:
``safetySettings``, ``cachedContent``, ``executableCode``, ``videoMetadata``…) and strict where a wrong
value would otherwise reach the upstream (types, ranges). Validation errors become one 400
``INVALID_ARGUMENT`` naming the Gemini path, e.g. ``contents.0.parts.1.inlineData.data``.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from freellm.core.request import Int, Number
from freellm.core.validation import error_path, friendly_message, invalid_request, validate_body

__all__ = [
    "Blob",
    "Content",
    "CountTokensRequest",
    "FileData",
    "FunctionCall",
    "FunctionCallingConfig",
    "FunctionDeclaration",
    "FunctionResponse",
    "GenerateContentRequest",
    "GenerationConfig",
    "Part",
    "ThinkingConfig",
    "Tool",
    "ToolConfig",
    "parse_count_tokens_request",
    "parse_generate_request",
]



class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        hide_input_in_errors=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
    )


# ---- parts and contents ------------------------------------------------------------------------------


class Blob(_Wire):
    mime_type: str
    data: str
    """Base64."""


class FileData(_Wire):
    file_uri: str
    mime_type: str | None = None


class FunctionCall(_Wire):
    name: str
    id: str | None = None
    args: Any = None
    """An object (a Struct); anything else is wrapped as ``{"value": …}``."""


class FunctionResponse(_Wire):
    name: str
    id: str | None = None
    response: Any = None


class Part(_Wire):
    """One part. Exactly one data field is expected; unknown kinds (``executableCode``…) are ignored."""

    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None


class Content(_Wire):
    role: str | None = None
    parts: list[Part] = Field(default_factory=list)


# ---- tools ----------------------------------------------------------------------------------------------


class FunctionDeclaration(_Wire):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    """Gemini's OpenAPI-subset ``Schema`` (``type: OBJECT``…)."""
    parameters_json_schema: dict[str, Any] | None = None
    """A JSON Schema (the newer alternative to ``parameters``)."""


class Tool(_Wire):
    """``functionDeclarations``; other tools (``googleSearch``, ``codeExecution``, ``urlContext``…) are
    accepted and dropped: the routed upstreams cannot run them."""

    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(_Wire):
    mode: str | None = None
    allowed_function_names: list[str] | None = None


class ToolConfig(_Wire):
    function_calling_config: FunctionCallingConfig | None = None


# ---- generation config ------------------------------------------------------------------------------


class ThinkingConfig(_Wire):
    include_thoughts: bool | None = None
    thinking_budget: Int | None = None
    thinking_level: str | None = None


Penalty = Annotated[float, Field(ge=-2, le=2)]


class GenerationConfig(_Wire):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Number | None = None
    """A float in the SDK's types; checked (integral, ≥ 0) when it is translated."""
    candidate_count: Int | None = None
    max_output_tokens: Int | None = None
    stop_sequences: list[str] | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    seed: Int | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: dict[str, Any] | None = None
    thinking_config: ThinkingConfig | None = None


# ---- requests ---------------------------------------------------------------------------------------


class GenerateContentRequest(_Wire):
    """A ``:generateContent`` / ``:streamGenerateContent`` body. Unknown fields are accepted and ignored."""

    contents: list[Content] = Field(min_length=1)
    system_instruction: Content | str | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    generation_config: GenerationConfig | None = None
    model: str | None = None
    """Ignored: the model in the URL wins."""


class CountTokensRequest(_Wire):
    """A ``:countTokens`` body: ``contents``, or a whole ``generateContentRequest``."""

    contents: list[Content] | None = None
    generate_content_request: GenerateContentRequest | None = None


# ---- errors ------------------------------------------------------------------------------------------

def _describe(err: ErrorDetails) -> tuple[str, str]:
    # Union branch names pydantic adds to the location ("Content", "str") are ours, not the client's.
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p in ("Content", "str"))]
    return error_path(loc), friendly_message(err)


M = TypeVar("M", bound=BaseModel)


def _validate(model: type[M], body: object) -> M:
    return validate_body(model, body, _describe)


def parse_generate_request(body: object) -> GenerateContentRequest:
    """Validate a decoded JSON body. Raises :class:`ClientError` (400) and nothing else."""
    return _validate(GenerateContentRequest, body)


def parse_count_tokens_request(body: object) -> CountTokensRequest:
    """Validate a ``:countTokens`` body (``contents`` or ``generateContentRequest`` required)."""
    req = _validate(CountTokensRequest, body)
    if req.generate_content_request is None and not req.contents:
        raise invalid_request(["contents: Array should have at least 1 item"], "contents")
    return req
