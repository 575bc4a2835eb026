"""Legacy OpenAI Completions surface: ``POST /v1/completions`` (spec/surfaces.md §4).

Editor ghost-text plugins send a prompt (the text before the cursor) and optionally a ``suffix`` (the text
after it). Free upstreams are chat models, so the request becomes the **autocomplete chat prompt**: a
system message framing the model as a code-autocomplete engine that answers with only the text to insert,
and one user message carrying the labelled prefix, the labelled suffix (when there is one) and a final cue.
That canonical request runs through the same engine, fallback loop and pump as every other surface.

The answer is rendered as ``text_completion`` objects: one body for a non-stream call, and for a stream
one frame per canonical chunk that has something this wire can carry (text or a finish reason), then the
usage frame if the client asked for it, then ``data: [DONE]``. ``choices[0].text`` is always a string;
reasoning, role and tool-call deltas have no place in this wire and are never forwarded. The commit point
is the pump's: nothing is sent before the first text, so earlier failures fail over invisibly; a failure
after it is one ``stream_error`` frame followed by ``[DONE]``.

Documented in ``docs/surfaces/completions.md``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import orjson
from aiohttp import web
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from freellm.core.chunks import Chunk
from freellm.core.request import ChatRequest, Int, Number, Penalty, Unit, parse_chat_request
from freellm.core.validation import error_path, friendly_message, validation_error
from freellm.engine.context import TurnOutcome
from freellm.errors import ClientError
from freellm.server.body import read_json
from freellm.server.errors import openai_error_body, register_error_style
from freellm.server.state import GATEWAY
from freellm.server.turn_http import respond_turn

__all__ = [
    "AUTOCOMPLETE_SYSTEM_PROMPT",
    "PATH",
    "CompletionRequest",
    "CompletionsRenderer",
    "autocomplete_messages",
    "completion_body",
    "legacy_finish_reason",
    "parse_completion_request",
    "register",
    "to_chat_request",
]

PATH = "/v1/completions"
SURFACE = "completions"

AUTOCOMPLETE_SYSTEM_PROMPT = (
    "You are a code autocomplete engine. Complete the text at the cursor and answer with only the text "
    "to insert there: no markdown fences, no explanations or commentary, and do not repeat the code "
    "before or after the cursor."
)
"""The system message of the autocomplete chat prompt (spec/surfaces.md §4)."""

_PREFIX_LABEL = "Prefix before cursor:\n"
_SUFFIX_LABEL = "Suffix after cursor:\n"
_CUE = "Completion to insert:"

_MAX_STOP = 64
_KEPT_STOP = 4
_DONE = b"data: [DONE]\n\n"


# ---- the request ------------------------------------------------------------------------------------


def _prompt(value: Any) -> str:
    """One text prompt: a string, or a one-element array holding a string."""
    if isinstance(value, str):
        return value
    if value is None:
        raise PydanticCustomError("prompt", "Field required (null given); send the text before the cursor")
    if isinstance(value, list):
        if not value:
            raise PydanticCustomError("prompt", "Array should have at least 1 item")
        if all(isinstance(p, str) for p in value):
            if len(value) > 1:
                raise PydanticCustomError(
                    "prompt",
                    "Only one prompt per request is supported ({count} given); send one request per prompt",
                    {"count": len(value)},
                )
            first: str = value[0]
            return first
        if all(isinstance(p, int) and not isinstance(p, bool) for p in value) or all(
            isinstance(p, list) for p in value
        ):
            raise PydanticCustomError(
                "prompt",
                "Token-id prompts are not supported (upstream tokenizers differ); send the prompt as text",
            )
    raise PydanticCustomError("prompt", "Input should be a string or an array holding one string")


def _stop(value: Any) -> str | list[str] | None:
    # Same rule as the chat surface: a string or 1-64 strings, the first four forwarded.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and 1 <= len(value) <= _MAX_STOP and all(isinstance(s, str) for s in value):
        return value[:_KEPT_STOP]
    raise PydanticCustomError("stop", "Input should be a string or an array of 1-64 strings")


def _null_false(value: Any) -> Any:
    return False if value is None else value


class CompletionRequest(BaseModel):
    """A validated ``POST /v1/completions`` body.

    Unknown fields are accepted and ignored (not forwarded: a chat upstream would not know them).
    ``n``/``best_of`` above 1 and ``logprobs`` are refused: one chat turn yields one choice and no token
    log-probabilities, and answering with less than was asked for would break the client silently.
    """

    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        hide_input_in_errors=True,
    )

    model: str | None = None
    prompt: Annotated[str, PlainValidator(_prompt)]
    suffix: str | None = None
    max_tokens: Int | None = None
    """The client's cap; absent, null or ≤ 0 means the configured default (128)."""
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Unit | None = None
    stop: Annotated[str | list[str] | None, PlainValidator(_stop)] = None
    stream: Annotated[bool, BeforeValidator(_null_false)] = False
    stream_options: dict[str, Any] | None = None
    echo: bool | None = None
    n: Annotated[Int, Field(ge=1, le=1)] | None = None
    best_of: Annotated[Int, Field(ge=1, le=1)] | None = None
    logprobs: None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    seed: Int | None = None
    logit_bias: dict[str, Number] | None = None
    user: str | None = None
    # Extended sampling that OpenAI-compatible servers (vLLM, llama.cpp…) accept on chat as well.
    top_k: Annotated[Int, Field(ge=1)] | None = None
    min_p: Unit | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None


# Validated fields forwarded to the chat request unchanged (when set).
_FORWARDED = (
    "temperature",
    "top_p",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "logit_bias",
    "user",
    "top_k",
    "min_p",
    "repetition_penalty",
)

_OUT_OF_RANGE = frozenset({"greater_than_equal", "less_than_equal", "none_required"})
_UNSUPPORTED = {
    "n": "Only 1 is supported (one completion per request)",
    "best_of": "Only 1 is supported (one completion per request)",
    "logprobs": "Not supported (chat upstreams return no token log-probabilities); send null or omit it",
}


def parse_completion_request(body: object) -> CompletionRequest:
    """Validate a decoded JSON body. Raises :class:`ClientError` (400, naming the path) and nothing else."""
    if not isinstance(body, dict):
        raise ClientError(400, "Invalid request: body: Input should be a JSON object", param=None)
    try:
        req = CompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise _client_error(exc.errors(include_url=False)) from None
    except (TypeError, ValueError, RecursionError, OverflowError):
        # Only reachable with Python-level inputs JSON cannot produce.
        raise ClientError(400, "Invalid request: body: Input is not valid JSON") from None
    if req.echo and req.suffix:
        raise ClientError(400, "Invalid request: echo: echo cannot be combined with suffix", param="echo")
    return req


def _client_error(errors: list[ErrorDetails]) -> ClientError:
    return validation_error(errors, _describe)


def _describe(err: ErrorDetails) -> tuple[str, str]:
    loc = err["loc"]
    top = str(loc[0]) if loc else ""
    if top in _UNSUPPORTED and err["type"] in _OUT_OF_RANGE:
        return error_path(loc), _UNSUPPORTED[top]
    return error_path(loc), friendly_message(err)


def autocomplete_messages(prompt: str, suffix: str | None) -> list[dict[str, str]]:
    """The autocomplete chat prompt: system framing, then one user message with prefix, suffix and cue."""
    parts = [_PREFIX_LABEL + prompt]
    if suffix:
        parts.append(_SUFFIX_LABEL + suffix)
    parts.append(_CUE)
    return [
        {"role": "system", "content": AUTOCOMPLETE_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def to_chat_request(creq: CompletionRequest, *, default_max_tokens: int) -> ChatRequest:
    """The canonical chat request for a completion request."""
    max_tokens = (
        creq.max_tokens if creq.max_tokens is not None and creq.max_tokens > 0 else default_max_tokens
    )
    chat: dict[str, Any] = {
        "model": creq.model,
        "messages": autocomplete_messages(creq.prompt, creq.suffix),
        "stream": creq.stream,
        "max_tokens": max_tokens,
    }
    if creq.stream and creq.stream_options is not None:
        chat["stream_options"] = creq.stream_options
    d = creq.__dict__
    for name in _FORWARDED:
        value = d[name]
        if value is not None:
            chat[name] = value
    return parse_chat_request(chat)


# ---- the answer -------------------------------------------------------------------------------------


def legacy_finish_reason(reason: str | None) -> str | None:
    """The canonical finish reason in this wire: tool calls have no place here, so they read ``stop``."""
    if reason == "tool_calls" or reason == "function_call":
        return "stop"
    return reason


def completion_id(upstream_id: str) -> str:
    """``cmpl-…`` from the upstream's id (``chatcmpl-abc`` → ``cmpl-abc``)."""
    if upstream_id.startswith("chatcmpl-"):
        return "cmpl-" + upstream_id[len("chatcmpl-") :]
    if upstream_id.startswith("cmpl-"):
        return upstream_id
    return "cmpl-" + (upstream_id or str(int(time.time() * 1000)))


class CompletionsRenderer:
    """Renders canonical chunk batches as ``text_completion`` SSE frames. One per request; pure.

    * a chunk whose delta has text, or whose choice has a finish reason, becomes one frame with
      ``choices[0].text`` (``""`` when it only carries the finish reason);
    * role, keep-alive, reasoning and tool-call deltas become nothing;
    * the usage-only chunk becomes a ``choices: []`` frame with ``usage`` only when the client asked
      (``stream_options.include_usage``) — a naive ``choices[0].text`` reader must not trip on it;
    * with ``echo`` the prompt is prepended to the text of the first frame.

    Every frame carries the id, ``created`` and model of the first one, so the stream reads as one object.
    """

    content_type = "text/event-stream"

    __slots__ = ("_created", "_echo", "_id", "_include_usage", "_model")

    def __init__(self, *, include_usage: bool = False, echo_prompt: str | None = None) -> None:
        self._include_usage = include_usage
        self._echo = echo_prompt
        self._id: str | None = None
        self._created = 0
        self._model = ""

    def _pin(self, chunk: Chunk) -> None:
        cid = chunk.get("id")
        self._id = completion_id(cid if isinstance(cid, str) else "")
        created = chunk.get("created")
        self._created = (
            created if isinstance(created, int) and not isinstance(created, bool) else int(time.time())
        )
        model = chunk.get("model")
        self._model = model if isinstance(model, str) else ""

    def _frame(self, choices: list[dict[str, Any]], usage: Any = None) -> bytes:
        frame: dict[str, Any] = {
            "id": self._id,
            "object": "text_completion",
            "created": self._created,
            "model": self._model,
            "choices": choices,
        }
        if usage is not None:
            frame["usage"] = usage
        return b"data: " + orjson.dumps(frame) + b"\n\n"

    def chunks(self, chunks: list[Chunk]) -> bytes:
        out: list[bytes] = []
        for chunk in chunks:
            choices = chunk.get("choices")
            if not choices:
                usage = chunk.get("usage")
                if usage and self._include_usage:
                    if self._id is None:
                        self._pin(chunk)
                    out.append(self._frame([], usage))
                continue
            choice = choices[0]
            finish = legacy_finish_reason(choice.get("finish_reason") or None)
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if not isinstance(text, str):
                text = ""
            if not text and finish is None:
                continue  # role / keep-alive / reasoning / tool-call delta: nothing to say in this wire
            if self._id is None:
                self._pin(chunk)
            if self._echo is not None:
                text = self._echo + text
                self._echo = None
            out.append(self._frame([{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}]))
        return b"".join(out)

    def stream_error(self, provider: str, message: str) -> bytes:
        frame = {
            "error": {
                "message": f"Provider error ({provider}): stream interrupted: {message}",
                "type": "stream_error",
            }
        }
        return b"data: " + orjson.dumps(frame) + b"\n\n" + _DONE

    def done(self) -> bytes:
        return _DONE


def completion_body(outcome: TurnOutcome, *, echo_prompt: str | None = None) -> dict[str, Any]:
    """The non-stream ``text_completion`` for a finished turn (usage estimated when upstream sent none)."""
    result = outcome.result
    text = result.text
    if echo_prompt is not None:
        text = echo_prompt + text
    return {
        "id": completion_id(result.chunk_id),
        "object": "text_completion",
        "created": result.created,
        "model": outcome.attempt.route.model,
        "choices": [
            {
                "text": text,
                "index": 0,
                "logprobs": None,
                "finish_reason": legacy_finish_reason(result.finish_reason) or "stop",
            }
        ],
        "usage": result.usage
        or {
            "prompt_tokens": outcome.tokens_in,
            "completion_tokens": outcome.tokens_out,
            "total_tokens": outcome.tokens_in + outcome.tokens_out,
        },
    }


# ---- HTTP -------------------------------------------------------------------------------------------


async def completions(request: web.Request) -> web.StreamResponse:

    creq = parse_completion_request(await read_json(request))
    settings = request.app[GATEWAY].settings
    req = to_chat_request(creq, default_max_tokens=settings.surfaces.completions.default_max_tokens)
    echo = creq.prompt if creq.echo else None
    return await respond_turn(
        request,
        req,
        surface=SURFACE,
        renderer=CompletionsRenderer(include_usage=req.stream and req.include_usage, echo_prompt=echo),
        render_completion=lambda outcome: completion_body(outcome, echo_prompt=echo),
        cache_variant="echo" if echo is not None else "",
        compressible=False,
        output_limit_asked=creq.max_tokens is not None and creq.max_tokens > 0,  # the prompt is code around a cursor: rewriting it would change the completion
    )


def register(app: web.Application) -> None:
    """Add this surface's route and error style (OpenAI's envelope) to the app."""
    app.router.add_post(PATH, completions)
    register_error_style(app, PATH, openai_error_body)
