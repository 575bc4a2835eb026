"""The Ollama API's request bodies (``/api/chat``, ``/api/generate``, ``/api/show``, ``/api/embed``),
validated.

Ollama clients (Open WebUI, Continue, Zed, the ``ollama`` libraries) send loosely typed bodies: unknown
fields are ignored, as Ollama does, but a field of the wrong type is a 400 naming it — before any
upstream call — rather than a guess.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from freellm.core.validation import error_path, friendly_message
from freellm.errors import ClientError

__all__ = [
    "ChatBody",
    "EmbedBody",
    "GenerateBody",
    "LegacyEmbeddingsBody",
    "OllamaMessage",
    "OllamaOptions",
    "ShowBody",
    "ToolCallIn",
    "parse_body",
]


M = TypeVar("M", bound=BaseModel)


def _null_default_true(value: Any) -> Any:
    return True if value is None else value


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, allow_inf_nan=False, hide_input_in_errors=True)


class FunctionIn(_Wire):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """An object on this wire (Ollama's own); a JSON string is taken too, as some clients send one."""


class ToolCallIn(_Wire):
    function: FunctionIn
    id: str | None = None


class OllamaMessage(_Wire):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = ""
    images: list[str] | None = None
    """Base64 images (no data-URL prefix), on user messages."""
    tool_calls: list[ToolCallIn] | None = None
    tool_name: str | None = None
    """On a tool message: the function whose result this is (newer Ollama clients)."""
    tool_call_id: str | None = None
    thinking: str | None = None


class OllamaOptions(_Wire):
    """The Modelfile-style options that map onto a chat request; the rest (``num_ctx``, ``num_gpu``…)
    are about a local runtime and are ignored."""

    num_predict: int | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repeat_penalty: Annotated[float, Field(gt=0)] | None = None


Format = Literal["json"] | dict[str, Any] | None
Think = bool | Literal["low", "medium", "high"] | None


class _Turn(_Wire):
    model: str = ""
    format: Format = None
    options: OllamaOptions | None = None
    stream: Annotated[bool, BeforeValidator(_null_default_true)] = True
    """Ollama streams unless told not to."""
    think: Think = None
    keep_alive: str | int | float | None = None


class ChatBody(_Turn):
    messages: list[OllamaMessage] = Field(default_factory=list)
    tools: list[dict[str, Any]] | None = None


class GenerateBody(_Turn):
    prompt: str = ""
    suffix: str | None = None
    system: str | None = None
    images: list[str] | None = None
    raw: bool | None = None
    context: list[int] | None = None
    """A previous answer's context tokens: meaningless for remote models, accepted and ignored."""


class EmbedBody(_Wire):
    """``/api/embed``."""

    model: str = ""
    input: str | list[str] | None = None
    prompt: str | None = None
    """What some clients send instead of ``input``."""
    dimensions: Annotated[int, Field(ge=1, le=65536)] | None = None
    truncate: bool | None = None
    options: dict[str, Any] | None = None
    keep_alive: str | int | float | None = None


class LegacyEmbeddingsBody(_Wire):
    """The legacy ``/api/embeddings``: one prompt, one vector."""

    model: str = ""
    prompt: str = ""
    options: dict[str, Any] | None = None
    keep_alive: str | int | float | None = None


class ShowBody(_Wire):
    model: str | None = None
    name: str | None = None
    """The field older clients send instead of ``model``."""


def parse_body(model: type[M], body: object) -> M:
    """Validate a decoded JSON body; a 400 naming the first bad field (Ollama's ``{"error": ...}``)."""
    if not isinstance(body, dict):
        raise ClientError(400, "invalid request: the body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ClientError(400, f"invalid request: {_describe(exc.errors(include_url=False)[0])}") from None
    except (TypeError, ValueError, RecursionError, OverflowError):
        raise ClientError(400, "invalid request: the body is not valid JSON") from None


def _describe(err: ErrorDetails) -> str:
    where = error_path(err["loc"])
    return f"{where}: {friendly_message(err)}" if where else friendly_message(err)
