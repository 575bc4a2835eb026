"""The canonical chat request: validation (spec/core.md §1.5) and normalisation (§1.6).

Every inbound surface ends up with one :class:`ChatRequest`. It is validated once, normalised once and
then treated as immutable: the fallback loop calls :meth:`ChatRequest.upstream_body` once per attempt
and gets a fresh top-level dict each time, built from a cached JSON-ready body (rule 2: never mutate the
caller's request). Unknown top-level fields (``n``, ``user``, ``parallel_tool_calls``, ``metadata``…) are
kept and forwarded upstream.

:func:`parse_chat_request` is the only entry point for untrusted input. It raises
:class:`~freellm.errors.ClientError` (400) and nothing else, whatever the body.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from freellm.core.messages import (
    ROLE_TAGS,
    ROLES,
    Message,
    Tool,
    WireModel,
    content_stats,
    normalise_messages,
)
from freellm.core.validation import error_path, friendly_message, validation_error
from freellm.errors import ClientError

__all__ = ["ChatRequest", "ReasoningEffort", "ResponseFormat", "parse_chat_request"]

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high"]
_EFFORTS: dict[str, ReasoningEffort] = {
    "none": "none",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "max": "high",
    "off": "none",
}
_AUTO_MODELS = frozenset({"", "auto", "auto:"})
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_STOP = 64
_KEPT_STOP = 4


# ---- field types ----------------------------------------------------------------------------------


def _integral(value: Any) -> Any:
    # JSON has one number type: accept 100.0 where an integer is expected (strict mode rejects it).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _null_false(value: Any) -> Any:
    return False if value is None else value


Int = Annotated[int, BeforeValidator(_integral), Field(ge=_INT64_MIN, le=_INT64_MAX)]
Penalty = Annotated[float, Field(ge=-2, le=2)]
Unit = Annotated[float, Field(ge=0, le=1)]


def _number(value: Any) -> int | float:
    # Keeps the client's int/float as sent (a float field would turn -100 into -100.0).
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
    elif isinstance(value, float) and math.isfinite(value):
        return value
    raise PydanticCustomError("float_type", "Input should be a number")


Number = Annotated[int | float, PlainValidator(_number)]


def _stop(value: Any) -> str | list[str] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and 1 <= len(value) <= _MAX_STOP and all(isinstance(s, str) for s in value):
        return value[:_KEPT_STOP]
    raise PydanticCustomError("stop", "Input should be a string or an array of 1-64 strings")


def _tool_choice(value: Any) -> str | dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value in ("none", "auto", "required"):
            return value
        if value == "any":
            return "required"
    elif isinstance(value, dict) and value.get("type") == "function":
        fn = value.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return value
    raise PydanticCustomError(
        "tool_choice",
        'Input should be "none", "auto", "required", "any" or {"type":"function","function":{"name":…}}',
    )


def _effort(value: Any) -> ReasoningEffort | None:
    # Free-form on input; anything we cannot map is dropped rather than rejected.
    if isinstance(value, str):
        return _EFFORTS.get(value.strip().lower())
    return None


class ResponseFormat(WireModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


# Fields that are validated but never forwarded as-is (folded into others, or set per attempt).
_NOT_FORWARDED = frozenset(
    (
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_completion_tokens",
        "reasoning",
        "tools",
        "tool_choice",
    )
)


class ChatRequest(BaseModel):
    """A validated, normalised ``POST /v1/chat/completions`` body. Treat it as immutable.

    To derive a changed request (compression, profile prompt, budget cap…) use :meth:`replace`, which
    resets the cached derived values; never assign to fields.
    """

    model_config = ConfigDict(
        extra="allow",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        hide_input_in_errors=True,
    )

    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    stream: Annotated[bool, BeforeValidator(_null_false)] = False
    stream_options: dict[str, Any] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Unit | None = None
    max_tokens: Int | None = None
    """Effective output cap: the client's ``max_tokens`` (≤0 = unset), else ``max_completion_tokens``."""
    max_completion_tokens: Int | None = None
    stop: Annotated[str | list[str] | None, PlainValidator(_stop)] = None
    tools: list[Tool] | None = None
    tool_choice: Annotated[str | dict[str, Any] | None, PlainValidator(_tool_choice)] = None
    response_format: ResponseFormat | None = None
    top_k: Annotated[Int, Field(ge=1)] | None = None
    min_p: Unit | None = None
    seed: Int | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    logit_bias: dict[str, Number] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[Int, Field(ge=0, le=20)] | None = None
    reasoning_effort: Annotated[ReasoningEffort | None, PlainValidator(_effort)] = None
    """Normalised; taken from ``reasoning.effort`` when the flat field is absent."""
    reasoning: Any = None
    """Accepted for ``reasoning:{effort}``; never forwarded (the flat ``reasoning_effort`` is)."""

    # ---- normalisation ----------------------------------------------------------------------------

    @field_validator("messages")
    @classmethod
    def _normalise_messages(cls, v: list[Any]) -> list[Any]:
        return normalise_messages(v)

    @field_validator("max_tokens", "max_completion_tokens")
    @classmethod
    def _positive_or_unset(cls, v: int | None) -> int | None:
        return v if v is not None and v > 0 else None

    @field_validator("response_format")
    @classmethod
    def _drop_text_format(cls, v: ResponseFormat | None) -> ResponseFormat | None:
        return None if v is not None and v.type == "text" else v

    @model_validator(mode="after")
    def _fold_fields(self) -> Self:
        # The derived values' cache (see _cache): set here rather than declared as pydantic private
        # attributes, whose per-instance default machinery cost more than the rest of validation.
        object.__setattr__(self, "__pydantic_private__", _empty_cache())
        # The model is frozen; these are the only two writes, made while it is still being built.
        if self.max_tokens is None and self.max_completion_tokens is not None:
            self.__dict__["max_tokens"] = self.max_completion_tokens
        if self.reasoning_effort is None and isinstance(self.reasoning, dict):
            self.__dict__["reasoning_effort"] = _effort(self.reasoning.get("effort"))
        return self

    # ---- derived values (cheap, computed at most once) ---------------------------------------------

    @property
    def requested_model(self) -> str:
        """The client's model id, or ``"auto"`` when absent, empty, ``auto`` or ``auto:``."""
        cache: dict[str, Any] = self.__pydantic_private__  # type: ignore[assignment]
        m: str | None = cache["_model"]
        if m is None:
            m = self.model
            m = "auto" if m is None or (m := m.strip()).lower() in _AUTO_MODELS else m
            cache["_model"] = m
        return m

    @property
    def wants_tools(self) -> bool:
        """Tools were declared and ``tool_choice`` is not ``"none"``."""
        return bool(self.tools) and self.tool_choice != "none"

    @property
    def include_usage(self) -> bool:
        """The client expects a usage record: always for a non-stream reply (a completion carries
        ``usage``), for a stream only with ``stream_options.include_usage: true``."""
        so = self.stream_options
        return not self.stream or (so is not None and so.get("include_usage") is True)

    @property
    def has_images(self) -> bool:
        """Some message has an ``image_url``/``image`` content part."""
        return self._content_stats()[1] > 0

    @property
    def image_count(self) -> int:
        return self._content_stats()[1]

    @property
    def text_token_estimate(self) -> int:
        """Σ ceil(len/4) over every text block of every message (spec §9; images not included)."""
        return self._content_stats()[0]

    @property
    def tool_schemas(self) -> dict[str, dict[str, Any]]:
        """Declared tool name → its parameters schema (``{}`` when it has none). Do not mutate."""
        cache = self._cache
        s: dict[str, dict[str, Any]] | None = cache["_schemas"]
        if s is None:
            s = cache["_schemas"] = {t.function.name: t.function.parameters or {} for t in self.tools or ()}
        return s

    @property
    def _cache(self) -> dict[str, Any]:
        # Read the private-attribute dict directly: pydantic's __getattr__ path costs ~1 µs per access.
        return self.__pydantic_private__  # type: ignore[return-value]

    def _content_stats(self) -> tuple[int, int]:
        cache = self._cache
        st: tuple[int, int] | None = cache["_stats"]
        if st is None:
            tokens = images = 0
            for m in self.messages:
                t, i = content_stats(m.content)
                tokens += t
                images += i
            st = cache["_stats"] = (tokens, images)
        return st

    # ---- upstream body ------------------------------------------------------------------------------

    def upstream_body(self, model: str, *, stream: bool) -> dict[str, Any]:
        """The JSON-ready body for an OpenAI-compatible upstream, with ``model`` and ``stream`` set.

        A new top-level dict on every call (the request itself is never touched), but nested values
        (``messages``, ``tools``…) are shared between calls: copy one before changing it.
        ``stream_options`` is included only if the client sent it and ``stream`` is true.
        """
        cache = self._cache
        base: dict[str, Any] | None = cache["_wire"]
        if base is None:
            base = cache["_wire"] = self._build_wire()
        body = {"model": model, **base, "stream": stream}
        if stream and self.stream_options is not None:
            body["stream_options"] = self.stream_options
        return body

    def _build_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": [m.wire() for m in self.messages]}
        if self.tools:
            body["tools"] = [t.wire() for t in self.tools]
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
        d = self.__dict__
        for name in _FORWARDED:
            v = d[name]
            if v is not None:
                body[name] = v.wire() if isinstance(v, WireModel) else v
        for k, v in (self.__pydantic_extra__ or {}).items():
            if v is not None:
                body[k] = v
        return body

    def replace(self, **changes: Any) -> ChatRequest:
        """A copy with ``changes`` applied; derived values (body, estimates, schemas) are recomputed.

        ``messages`` may be message models or wire dicts: they are validated and normalised again (a
        pipeline bug raises :class:`pydantic.ValidationError`). Other values must already have the
        field's normalised type; they are not re-validated.
        """
        if "messages" in changes:
            changes["messages"] = normalise_messages(_MESSAGES.validate_python(changes["messages"]))
        return self.model_copy(update=changes)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        new = super().model_copy(update=update, deep=deep)
        object.__setattr__(new, "__pydantic_private__", _empty_cache())
        return new


def _empty_cache() -> dict[str, Any]:
    """A request's derived values, none computed yet: the upstream body's base, the content
    statistics, the tool schemas and the requested model."""
    return {"_wire": None, "_stats": None, "_schemas": None, "_model": None}


_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message], config=ConfigDict(strict=True))
_FORWARDED = tuple(n for n in ChatRequest.model_fields if n not in _NOT_FORWARDED)


# ---- parsing ----------------------------------------------------------------------------------------


_UNSERIALISABLE = "Invalid request: body: Input is nested too deeply or is not valid JSON"


def parse_chat_request(body: object) -> ChatRequest:
    """Validate and normalise a decoded JSON chat body. Raises :class:`ClientError` (400) and nothing else."""
    if not isinstance(body, dict):
        raise ClientError(
            400, "Invalid request: body: Input should be a JSON object", type="invalid_request_error"
        )
    try:
        req = ChatRequest.model_validate(body)
    except ValidationError as exc:
        raise _client_error(exc.errors(include_url=False)) from None
    except (TypeError, ValueError, RecursionError, OverflowError):
        # Only reachable with Python-level inputs JSON cannot produce; the contract still holds.
        raise ClientError(400, _UNSERIALISABLE, type="invalid_request_error") from None
    try:
        # Unvalidated subtrees (parts, schemas, unknown fields) are forwarded as they are: make sure the
        # upstream body will serialise. orjson's decoder accepts 1024 levels of nesting, its encoder
        # only 254; this also catches non-JSON values from in-process callers. ~0.2 µs for a small body.
        orjson.dumps(body)
    except orjson.JSONEncodeError:
        raise ClientError(400, _UNSERIALISABLE, type="invalid_request_error") from None
    return req


def _client_error(errors: list[ErrorDetails]) -> ClientError:
    return validation_error(errors, _describe)


def _describe(err: ErrorDetails) -> tuple[str, str]:
    loc = list(err["loc"])
    kind = err["type"]
    msg = friendly_message(err)
    # ('messages', 0, '<role tag>', 'content') → messages.0.content
    if len(loc) >= 3 and loc[0] == "messages" and isinstance(loc[1], int) and loc[2] in ROLE_TAGS:
        del loc[2]
    if kind == "invalid_role":
        if isinstance(err.get("input"), dict):
            loc.append("role")
            msg = "Input should be one of " + ", ".join(ROLES)
        else:
            msg = "Input should be an object"
    return error_path(loc), msg
