"""The Gemini ``generateContent`` wire: request checking and rendering of plans, errors and model lists.

``POST /{provider}/v1beta/models/{model}:generateContent`` (non-stream),
``…:streamGenerateContent?alt=sse`` (SSE, one ``GenerateContentResponse`` per ``data:`` line) and
``…:streamGenerateContent`` without ``alt`` (a streamed JSON array of responses), with the key in
``x-goog-api-key``. :func:`wire_for_action` picks one of three instances by action and ``alt``.

Requests are checked the way the Gemini API checks them, with its wording, so a gateway that translates
badly gets the 400 ``INVALID_ARGUMENT`` Google would send: unknown fields anywhere (``Unknown name "x"``),
missing or empty ``contents``/``parts``, roles other than user/model, a part with no or two data fields,
empty text, bad ``inlineData``, function calls outside model turns or not right after a user turn,
function responses whose count differs from the calls they answer, a Gemini 3 function call of the
current tool loop without ``thoughtSignature``, system instructions or JSON mode for Gemma, schema keywords Gemini does
not know (``additionalProperties``, ``$schema``…), type arrays, a schema without ``type`` (unless it
is an ``anyOf``), ``properties``/``required`` on a non-object and ``items`` on a non-array, empty
object ``properties``, arrays without ``items``, ``enum`` on non-strings, string formats other than ``enum``/``date-time``,
``required`` naming an undefined property, JSON mode together with function declarations, more than 5
stop sequences, both ``thinkingBudget`` and ``thinkingLevel``.

Streams are one response object per content chunk: thought parts (``thought: true``) for the reasoning,
text parts, one ``functionCall`` part per tool call (whole arguments, as Gemini sends them; the first call
carries a ``thoughtSignature``, :func:`thought_signature_of`), then a final frame with ``finishReason`` and
``usageMetadata``. Content chunks for ``cut_after``/``stall_after``/``inband_error_after`` are the text
frames and the function-call frames.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
from collections.abc import Mapping
from typing import Any, Final, Literal

import orjson
from aiohttp import web

from freellm.sim.plan import Frame, FrameKind, Plan
from freellm.sim.scenario import Scenario
from freellm.sim.wire import RequestView, WireRequestError

__all__ = [
    "GEMINI_ACTIONS",
    "GEMINI_JSON_STREAM_WIRE",
    "GEMINI_SSE_WIRE",
    "GEMINI_UNARY_WIRE",
    "GeminiWire",
    "finish_reason_of",
    "split_target",
    "thought_signature_of",
    "wire_for_action",
]

Mode = Literal["unary", "sse", "json"]

GEMINI_ACTIONS: Final = frozenset({"generateContent", "streamGenerateContent"})
KEEPALIVE_FRAME: Final = b": keep-alive\r\n\r\n"
GARBAGE_FRAMES: Final = (
    b"data: {not json\r\n\r\n",
    b": sim comment\r\n\r\n",
    b"this line has no data prefix\r\n\r\n",
)

# HTTP status -> google.rpc.Code name (https://cloud.google.com/apis/design/errors).
_STATUS_NAMES: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# finish_reason of a scenario (OpenAI vocabulary) -> Gemini finishReason; other strings upper-cased.
_FINISH: Final[dict[str, str]] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
_TOP_LEVEL: Final = frozenset(
    {
        "contents",
        "systemInstruction",
        "system_instruction",
        "tools",
        "toolConfig",
        "tool_config",
        "generationConfig",
        "generation_config",
        "safetySettings",
        "safety_settings",
        "cachedContent",
        "cached_content",
    }
)
_DATA_FIELDS: Final[dict[str, str]] = {
    "text": "text",
    "inlineData": "inlineData",
    "inline_data": "inlineData",
    "fileData": "fileData",
    "file_data": "fileData",
    "functionCall": "functionCall",
    "function_call": "functionCall",
    "functionResponse": "functionResponse",
    "function_response": "functionResponse",
    "executableCode": "executableCode",
    "executable_code": "executableCode",
    "codeExecutionResult": "codeExecutionResult",
    "code_execution_result": "codeExecutionResult",
}
_PART_MODIFIERS: Final = frozenset(
    {"thought", "thoughtSignature", "thought_signature", "videoMetadata", "video_metadata", "partMetadata"}
)
_SCHEMA_KEYS: Final = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
_SCHEMA_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_GENERATION_KEYS: Final = frozenset(
    {
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "candidateCount",
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseLogprobs",
        "logprobs",
        "enableEnhancedCivicAnswers",
        "speechConfig",
        "thinkingConfig",
        "mediaResolution",
    }
)
_THINKING_KEYS: Final = frozenset({"thinkingBudget", "includeThoughts", "thinkingLevel"})
_TOOL_KINDS: Final = frozenset(
    {
        "functionDeclarations",
        "function_declarations",
        "googleSearch",
        "google_search",
        "googleSearchRetrieval",
        "codeExecution",
        "code_execution",
        "urlContext",
        "url_context",
    }
)
_DECLARATION_KEYS: Final = frozenset(
    {
        "name",
        "description",
        "parameters",
        "parametersJsonSchema",
        "response",
        "responseJsonSchema",
        "behavior",
    }
)
_FUNCTION_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
_MAX_STOP_SEQUENCES: Final = 5
_MISSING_SIGNATURE: Final = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to "
    "work correctly, and missing thought_signature may lead to degraded model performance. Additional "
    "data, function call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def split_target(target: str) -> tuple[str, str]:
    """``"gemini-2.5-flash:streamGenerateContent"`` → ``("gemini-2.5-flash", "streamGenerateContent")``."""
    model, sep, action = target.rpartition(":")
    if not sep:
        return target, ""
    return model.removeprefix("models/"), action


def finish_reason_of(finish_reason: str | None) -> str | None:
    """The Gemini ``finishReason`` for a scenario's finish reason."""
    if finish_reason is None:
        return None
    return _FINISH.get(finish_reason, finish_reason.upper())


def thought_signature_of(name: str, arguments: str) -> str:
    """The signature the simulator puts on a function call (deterministic, so tests can expect it)."""
    digest = hashlib.sha256(f"{name}\x00{arguments}".encode()).digest()
    return base64.b64encode(b"sim-sig:" + digest[:18]).decode()


def _needs_signatures(model: str) -> bool:
    m = re.search(r"gemini-(\d+)", model.lower())
    return m is not None and int(m.group(1)) >= 3


class GeminiWire:
    """Stateless renderer/reader for one of the three Gemini answer shapes."""

    name = "gemini"
    missing_key_message = (
        "Method doesn't allow unregistered callers (callers without established identity). Please use "
        "API Key or other form of API consumer identity to call this API."
    )

    def __init__(self, mode: Mode) -> None:
        self.mode: Mode = mode
        self.stream_headers: Mapping[str, str] = (
            {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            if mode == "sse"
            else {"Content-Type": "application/json; charset=UTF-8"}
        )

    def credential(self, request: web.BaseRequest) -> str | None:
        """The ``x-goog-api-key`` header (the only place freellm may put a key; ``?key=`` is not read)."""
        key = request.headers.get("x-goog-api-key", "").strip()
        return key or None

    def new_response_id(self) -> str:
        """A response id in Gemini's style (url-safe base64 text)."""
        return "sim" + secrets.token_urlsafe(15)

    def parse_request(self, body: Any, route: Mapping[str, str]) -> RequestView:
        """Check the body as the Gemini API does; raise :class:`WireRequestError` with its wording."""
        model = route.get("model") or split_target(route.get("target", ""))[0]
        _check_request(body, model)
        contents: list[dict[str, Any]] = body["contents"]
        system = body.get("systemInstruction") or body.get("system_instruction")
        system_text = _text_of((system or {}).get("parts")) if isinstance(system, dict) else ""
        prompt_chars = len(system_text) + sum(len(_text_of(c.get("parts"))) for c in contents)
        last_user = ""
        for content in contents:
            if content.get("role", "user") == "user":
                text = _text_of(content.get("parts"))
                if text:
                    last_user = text

        def messages_json() -> str:
            listed = {"systemInstruction": system, "contents": contents} if system else {"contents": contents}
            return orjson.dumps(listed).decode()

        return RequestView(
            model=model,
            stream=self.mode != "unary",
            prompt_chars=prompt_chars,
            last_user_text=last_user,
            messages_json=messages_json,
        )

    # ---- answers ------------------------------------------------------------------------------

    def _usage(self, plan: Plan) -> dict[str, int]:
        thoughts = max(1, len(plan.reasoning) // 4) if plan.reasoning else 0
        candidates = max(1, plan.completion_tokens - thoughts)
        usage = {
            "promptTokenCount": plan.prompt_tokens,
            "candidatesTokenCount": candidates,
            "totalTokenCount": plan.prompt_tokens + candidates + thoughts,
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return usage

    def _response(
        self,
        parts: list[dict[str, Any]],
        view: RequestView,
        response_id: str,
        *,
        finish: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish is not None:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        out: dict[str, Any] = {"candidates": [candidate]}
        if usage is not None:
            out["usageMetadata"] = usage
        out["modelVersion"] = view.model
        out["responseId"] = response_id
        return out

    def _parts(
        self, plan: Plan, scenario: Scenario
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(thought parts, text parts, function-call parts) of the answer, one part per stream chunk."""
        thoughts = [{"text": piece, "thought": True} for piece in plan.reasoning_pieces]
        texts: list[dict[str, Any]] = [{"text": piece} for piece in plan.text_pieces]
        calls: list[dict[str, Any]] = []
        for i, tool in enumerate(plan.tools):
            try:
                args = orjson.loads(tool.arguments)
            except orjson.JSONDecodeError:
                args = {}
            if not isinstance(args, dict):
                args = {}
            call: dict[str, Any] = {"name": tool.name, "args": args}
            if i < len(scenario.tool_calls) and scenario.tool_calls[i].id is not None:
                call = {"id": tool.id, **call}  # a scripted id plays a Gemini-issued functionCall.id
            part: dict[str, Any] = {"functionCall": call}
            if i == 0:  # parallel calls: only the first carries the signature, as Gemini does
                part["thoughtSignature"] = thought_signature_of(tool.name, tool.arguments)
            calls.append(part)
        if plan.reasoning and texts and not calls:
            texts[-1]["thoughtSignature"] = thought_signature_of("", plan.text)
        return thoughts, texts, calls

    def render_stream(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> list[Frame]:
        """All frames of the stream; transport faults (cut, stall, delays) are left to the driver."""
        usage = self._usage(plan) if scenario.usage != "none" else None
        running = (
            {"promptTokenCount": plan.prompt_tokens, "totalTokenCount": plan.prompt_tokens}
            if scenario.usage == "separate"
            else None
        )
        items: list[tuple[dict[str, Any], FrameKind]] = []

        def add(parts: list[dict[str, Any]], kind: FrameKind) -> None:
            items.append((self._response(parts, view, response_id, usage=running), kind))

        thoughts, texts, calls = self._parts(plan, scenario)
        for part in thoughts:
            add([part], FrameKind.PRE)
        if scenario.empty:
            add([{"text": ""}], FrameKind.PRE)
        content = [[p] for p in texts] + [[p] for p in calls]
        inband = scenario.inband_error
        if inband is not None:
            del content[scenario.inband_error_after :]
        for parts in content:
            add(parts, FrameKind.CONTENT)
        if inband is not None:
            items.append((self.render_inband_error(inband), FrameKind.POST))
        else:
            finish = finish_reason_of(plan.finish_reason) if scenario.done else None
            items.append(
                (
                    self._response([{"text": ""}], view, response_id, finish=finish, usage=usage),
                    FrameKind.POST,
                )
            )

        if self.mode == "json":
            frames = []
            for n, (obj, kind) in enumerate(items):
                prefix = b"[" if n == 0 else b",\r\n"
                frames.append(Frame(prefix + orjson.dumps(obj), kind))
            frames.append(Frame(b"]", FrameKind.POST))
            return frames
        frames = [Frame(KEEPALIVE_FRAME, FrameKind.NOISE)] * scenario.keepalive_comments
        frames.extend(Frame(b"data: " + orjson.dumps(obj) + b"\r\n\r\n", kind) for obj, kind in items)
        if scenario.malformed:
            frames = _interleave_garbage(frames)
        return frames

    def render_completion(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> dict[str, Any]:
        """The ``GenerateContentResponse`` carrying the same thoughts, text, calls and usage."""
        _, texts, calls = self._parts(plan, scenario)
        parts: list[dict[str, Any]] = [{"text": plan.reasoning, "thought": True}] if plan.reasoning else []
        if plan.text:
            text_part: dict[str, Any] = {"text": plan.text}
            if texts and "thoughtSignature" in texts[-1]:
                text_part["thoughtSignature"] = texts[-1]["thoughtSignature"]
            parts.append(text_part)
        parts.extend(calls)
        usage = self._usage(plan) if scenario.usage != "none" else None
        finish = finish_reason_of(plan.finish_reason)
        return self._response(parts, view, response_id, finish=finish, usage=usage)

    def render_error(self, status: int, message: str) -> dict[str, Any]:
        """Google's ``{"error": {code, message, status, details?}}`` envelope."""
        return self.render_error_with_retry(status, message, None)

    def render_error_with_retry(self, status: int, message: str, retry_after: str | None) -> dict[str, Any]:
        """The envelope with a ``google.rpc.RetryInfo`` detail (Gemini's only retry hint) when given."""
        err: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": _STATUS_NAMES.get(status) or ("INTERNAL" if status >= 500 else "INVALID_ARGUMENT"),
        }
        details: list[dict[str, Any]] = []
        if "api key not valid" in message.lower():
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                }
            )
        if status == 429:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        }
                    ],
                }
            )
        if retry_after is not None:
            details.append(
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after}s"}
            )
        if details:
            err["details"] = details
        return {"error": err}

    def render_inband_error(self, message: str) -> dict[str, Any]:
        """The error object sent as a stream frame (or as a 200 body for a non-stream request)."""
        overloaded = "overload" in message.lower() or "unavailable" in message.lower()
        code, status = (503, "UNAVAILABLE") if overloaded else (500, "INTERNAL")
        return {"error": {"code": code, "message": message, "status": status}}

    def models_list(self, provider: str, models: list[str]) -> dict[str, Any]:
        """Gemini's ``GET /v1beta/models`` body."""
        return {
            "models": [
                {
                    "name": f"models/{m}",
                    "version": "001",
                    "displayName": m,
                    "inputTokenLimit": 1048576,
                    "outputTokenLimit": 65536,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                }
                for m in models
            ]
        }


GEMINI_UNARY_WIRE: Final = GeminiWire("unary")
GEMINI_SSE_WIRE: Final = GeminiWire("sse")
GEMINI_JSON_STREAM_WIRE: Final = GeminiWire("json")


def wire_for_action(action: str, alt: str | None) -> GeminiWire | None:
    """The wire instance for ``:generateContent`` / ``:streamGenerateContent[?alt=sse]`` (None: unknown)."""
    if action == "generateContent":
        return GEMINI_UNARY_WIRE
    if action == "streamGenerateContent":
        return GEMINI_SSE_WIRE if (alt or "").lower() == "sse" else GEMINI_JSON_STREAM_WIRE
    return None


def _interleave_garbage(frames: list[Frame]) -> list[Frame]:
    out: list[Frame] = []
    n = 0
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        out.append(frame)
        if i < last and frame.kind is not FrameKind.NOISE:
            out.append(Frame(GARBAGE_FRAMES[n % len(GARBAGE_FRAMES)], FrameKind.NOISE))
            n += 1
    return out


def _text_of(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )


# ---- request checks (the Gemini API's rules and wording) ---------------------------------------------


def _unknown(name: str, where: str | None = None) -> WireRequestError:
    at = f" at '{where}'" if where else ""
    return WireRequestError(f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.')


def _invalid(path: str, why: str) -> WireRequestError:
    return WireRequestError(f"* GenerateContentRequest.{path}: {why}")


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    return obj[camel] if camel in obj else obj.get(snake)


def _check_request(body: Any, model: str) -> None:
    if not isinstance(body, dict):
        raise WireRequestError("Invalid JSON payload received. Expected an object.")
    for key in body:
        if key not in _TOP_LEVEL:
            raise _unknown(key)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise _invalid("contents", "contents is not specified")
    system = _get(body, "systemInstruction", "system_instruction")
    if system is not None:
        if not isinstance(system, dict):
            raise WireRequestError("Invalid value at 'system_instruction': expected an object")
        if "gemma" in model.lower():
            raise WireRequestError(f"Developer instruction is not enabled for models/{model}")
        _check_parts(system.get("parts"), "system_instruction", "user")
    declared = _check_tools(body.get("tools"))
    _check_tool_config(_get(body, "toolConfig", "tool_config"), declared)
    generation = _get(body, "generationConfig", "generation_config")
    _check_generation(generation, bool(declared))
    json_mode = isinstance(generation, dict) and (
        _get(generation, "responseMimeType", "response_mime_type") == "application/json"
    )
    if json_mode and "gemma" in model.lower():
        raise WireRequestError(f"JSON mode is not enabled for models/{model}")
    _check_contents(contents, model)


def _check_contents(contents: list[Any], model: str) -> None:
    roles: list[str] = []
    calls_per_turn: list[list[dict[str, Any]]] = []
    responses_per_turn: list[int] = []
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(content, dict):
            raise WireRequestError(f"Invalid value at '{where}': expected an object")
        for key in content:
            if key not in ("role", "parts"):
                raise _unknown(key, where)
        role = content.get("role") or "user"
        if role not in ("user", "model"):
            raise WireRequestError("Please use a valid role: user, model.")
        parts = content.get("parts")
        _check_parts(parts, where, role)
        assert isinstance(parts, list)
        roles.append(role)
        calls_per_turn.append([p for p in parts if _has(p, "functionCall")])
        responses_per_turn.append(sum(1 for p in parts if _has(p, "functionResponse")))
    for i, calls in enumerate(calls_per_turn):
        if not calls:
            continue
        if i == 0 or roles[i - 1] != "user":
            raise WireRequestError(
                "Please ensure that function call turn comes immediately after a user turn or after a "
                "function response turn."
            )
        if i + 1 < len(roles) and responses_per_turn[i + 1] != len(calls):
            raise WireRequestError(
                "Please ensure that the number of function response parts is equal to the number of "
                "function call parts of the function call turn."
            )
    if _needs_signatures(model):
        # The current turn: everything after the last user content that is not only function responses.
        start = 0
        for i, content in enumerate(contents):
            parts = content["parts"]
            if roles[i] == "user" and any(not _has(p, "functionResponse") for p in parts):
                start = i + 1
        for i in range(start, len(contents)):
            calls = calls_per_turn[i]
            if not calls:
                continue
            first = calls[0]
            if not _get(first, "thoughtSignature", "thought_signature"):
                name = _get(first, "functionCall", "function_call").get("name", "")
                position = contents[i]["parts"].index(first) + 1
                raise WireRequestError(_MISSING_SIGNATURE.format(name=name, position=position))


def _has(part: Any, camel: str) -> bool:
    if not isinstance(part, dict):
        return False
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return camel in part or snake in part


def _check_parts(parts: Any, where: str, role: str) -> None:
    if not isinstance(parts, list) or not parts:
        raise _invalid(f"{where}.parts", "contents.parts must not be empty.")
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if not isinstance(part, dict):
            raise WireRequestError(f"Invalid value at '{at}': expected an object")
        data = [k for k in part if k in _DATA_FIELDS]
        for key in part:
            if key not in _DATA_FIELDS and key not in _PART_MODIFIERS:
                raise _unknown(key, at)
        if len(data) != 1:
            raise _invalid(f"{at}.data", "required oneof field 'data' must have one initialized field")
        kind = _DATA_FIELDS[data[0]]
        value = part[data[0]]
        if kind == "text":
            if not isinstance(value, str):
                raise WireRequestError(f"Invalid value at '{at}.text': expected a string")
            if not value:
                raise WireRequestError(
                    "Unable to submit request because it has an empty text parameter. Add a value to the "
                    "parameter and try again."
                )
        elif kind == "inlineData":
            _check_inline(value, at)
        elif kind == "functionCall":
            if role != "model":
                raise _invalid(f"{at}.function_call", "function calls are only allowed in model turns")
            _check_call(value, at)
        elif kind == "functionResponse":
            if role != "user":
                raise _invalid(f"{at}.function_response", "function responses are only allowed in user turns")
            _check_response(value, at)
        signature = _get(part, "thoughtSignature", "thought_signature")
        if signature is not None and not isinstance(signature, str):
            raise WireRequestError(f"Invalid value at '{at}.thought_signature': expected a string")


def _check_inline(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise WireRequestError(f"Invalid value at '{at}.inline_data': expected an object")
    for key in value:
        if key not in ("mimeType", "mime_type", "data"):
            raise _unknown(key, f"{at}.inline_data")
    mime = _get(value, "mimeType", "mime_type")
    data = value.get("data")
    if not isinstance(mime, str) or not mime:
        raise _invalid(f"{at}.inline_data.mime_type", "required field is not specified")
    if not isinstance(data, str) or not data:
        raise _invalid(f"{at}.inline_data.data", "required field is not specified")
    try:
        base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireRequestError(
            f"Invalid value at '{at}.inline_data.data' (TYPE_BYTES), Base64 decoding failed"
        ) from exc


def _check_call(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise WireRequestError(f"Invalid value at '{at}.function_call': expected an object")
    for key in value:
        if key not in ("name", "args", "id"):
            raise _unknown(key, f"{at}.function_call")
    name = value.get("name")
    if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
        raise _invalid(f"{at}.function_call.name", "Invalid function name.")
    if "args" in value and not isinstance(value["args"], dict):
        raise WireRequestError(
            f"Invalid value at '{at}.function_call.args' (type.googleapis.com/google.protobuf.Struct)"
        )


def _check_response(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise WireRequestError(f"Invalid value at '{at}.function_response': expected an object")
    for key in value:
        if key not in ("name", "response", "id", "parts", "willContinue", "scheduling"):
            raise _unknown(key, f"{at}.function_response")
    name = value.get("name")
    if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
        raise _invalid(f"{at}.function_response.name", "Invalid function name.")
    if not isinstance(value.get("response"), dict):
        raise _invalid(f"{at}.function_response.response", "required field is not specified")


def _check_tools(tools: Any) -> list[str]:
    """Check ``tools``; return the declared function names."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise WireRequestError("Invalid value at 'tools': expected a list")
    names: list[str] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise WireRequestError(f"Invalid value at '{where}': expected an object")
        for key in tool:
            if key not in _TOOL_KINDS:
                raise _unknown(key, where)
        declarations = _get(tool, "functionDeclarations", "function_declarations")
        if declarations is None:
            continue
        if not isinstance(declarations, list):
            raise WireRequestError(f"Invalid value at '{where}.function_declarations': expected a list")
        for j, decl in enumerate(declarations):
            at = f"{where}.function_declarations[{j}]"
            if not isinstance(decl, dict):
                raise WireRequestError(f"Invalid value at '{at}': expected an object")
            for key in decl:
                if key not in _DECLARATION_KEYS:
                    raise _unknown(key, at)
            name = decl.get("name")
            if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
                raise _invalid(
                    f"{at}.name",
                    "Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, "
                    "0-9, or contain underscores, dots, colons and dashes, with a maximum length of 64.",
                )
            if "parameters" in decl:
                _check_schema(decl["parameters"], f"{at}.parameters")
            names.append(name)
    return names


def _check_schema(node: Any, path: str) -> None:
    if not isinstance(node, dict):
        raise WireRequestError(f"Invalid value at '{path}': expected an object")
    for key in node:
        if key not in _SCHEMA_KEYS:
            raise _unknown(key, path)
    kind = node.get("type")
    if isinstance(kind, list):
        raise WireRequestError(
            f"Invalid value at '{path}.type': Proto field is not repeating, cannot start list."
        )
    if kind is not None and (not isinstance(kind, str) or kind.lower() not in _SCHEMA_TYPES):
        raise WireRequestError(
            f"Invalid value at '{path}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), "
            f'"{kind}"'
        )
    kind = kind.lower() if isinstance(kind, str) else None
    if kind is None and "anyOf" not in node:
        raise _invalid(f"{path}.type", "must be specified when not using one_of, any_of or all_of fields")
    for key, owner in (("properties", "object"), ("required", "object"), ("items", "array")):
        if key in node and kind != owner:
            raise _invalid(f"{path}.{key}", f"only allowed for {owner.upper()} type")
    props = node.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise WireRequestError(f"Invalid value at '{path}.properties': expected an object")
        if kind == "object" and not props:
            raise _invalid(f"{path}.properties", "should be non-empty for OBJECT type")
        for name, sub in props.items():
            _check_schema(sub, f"{path}.properties[{name}].value")
    required = node.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise WireRequestError(f"Invalid value at '{path}.required': expected a list of strings")
        for k, name in enumerate(required):
            if not isinstance(props, dict) or name not in props:
                raise _invalid(f"{path}.required[{k}]", "property is not defined")
    if kind == "array" and "items" not in node:
        raise _invalid(f"{path}.items", "missing field.")
    if "items" in node:
        _check_schema(node["items"], f"{path}.items")
    enum = node.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
            raise WireRequestError(f"Invalid value at '{path}.enum': expected a list of strings")
        if kind not in (None, "string"):
            raise _invalid(f"{path}.enum", "only allowed for STRING type")
    fmt = node.get("format")
    if isinstance(fmt, str) and kind == "string" and fmt not in ("enum", "date-time"):
        raise _invalid(f"{path}.format", "only 'enum' and 'date-time' are supported for STRING type")
    branches = node.get("anyOf")
    if branches is not None:
        if not isinstance(branches, list):
            raise WireRequestError(f"Invalid value at '{path}.any_of': expected a list")
        for k, sub in enumerate(branches):
            _check_schema(sub, f"{path}.any_of[{k}]")


def _check_tool_config(config: Any, declared: list[str]) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise WireRequestError("Invalid value at 'tool_config': expected an object")
    for key in config:
        if key not in ("functionCallingConfig", "function_calling_config", "retrievalConfig"):
            raise _unknown(key, "tool_config")
    fcc = _get(config, "functionCallingConfig", "function_calling_config")
    if fcc is None:
        return
    if not isinstance(fcc, dict):
        raise WireRequestError("Invalid value at 'tool_config.function_calling_config': expected an object")
    for key in fcc:
        if key not in ("mode", "allowedFunctionNames", "allowed_function_names"):
            raise _unknown(key, "tool_config.function_calling_config")
    mode = fcc.get("mode", "AUTO")
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"):
        raise WireRequestError(
            "Invalid value at 'tool_config.function_calling_config.mode' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), "{mode}"'
        )
    allowed = _get(fcc, "allowedFunctionNames", "allowed_function_names")
    if allowed:
        if mode not in ("ANY", "VALIDATED"):
            raise _invalid(
                "tool_config.function_calling_config.allowed_function_names",
                "allowed_function_names can only be set when mode is ANY.",
            )
        for name in allowed:
            if name not in declared:
                raise _invalid(
                    "tool_config.function_calling_config.allowed_function_names",
                    f"function {name} is not declared.",
                )


def _check_generation(config: Any, have_functions: bool) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise WireRequestError("Invalid value at 'generation_config': expected an object")
    for key in config:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
        if camel not in _GENERATION_KEYS:
            raise _unknown(key, "generation_config")
    stops = _get(config, "stopSequences", "stop_sequences")
    if stops is not None and (not isinstance(stops, list) or len(stops) > _MAX_STOP_SEQUENCES):
        raise _invalid("generation_config.stop_sequences", "at most 5 stop sequences are allowed")
    temperature = config.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float) or not 0 <= temperature <= 2):
        raise _invalid("generation_config.temperature", "temperature must be in [0.0, 2.0]")
    top_p = _get(config, "topP", "top_p")
    if top_p is not None and (not isinstance(top_p, int | float) or not 0 <= top_p <= 1):
        raise _invalid("generation_config.top_p", "top_p must be in [0.0, 1.0]")
    thinking = _get(config, "thinkingConfig", "thinking_config")
    if thinking is not None:
        if not isinstance(thinking, dict):
            raise WireRequestError("Invalid value at 'generation_config.thinking_config': expected an object")
        for key in thinking:
            camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
            if camel not in _THINKING_KEYS:
                raise _unknown(key, "generation_config.thinking_config")
        if _get(thinking, "thinkingBudget", "thinking_budget") is not None and (
            _get(thinking, "thinkingLevel", "thinking_level") is not None
        ):
            raise WireRequestError(
                "You cannot set both thinking_level and the legacy thinking_budget parameter."
            )
    mime = _get(config, "responseMimeType", "response_mime_type")
    if have_functions and mime == "application/json":
        raise WireRequestError(
            "Function calling with a response mime type: 'application/json' is unsupported"
        )
    schema = _get(config, "responseSchema", "response_schema")
    if schema is not None:
        _check_schema(schema, "generation_config.response_schema")
