"""Gemini ``generateContent`` request → canonical chat request (spec/surfaces.md §3a "In").

* ``systemInstruction`` (a ``Content`` or a string): its texts, joined with ``\\n``, are one leading
  system message.
* ``contents``: ``model`` → assistant, ``user`` (or no role; ``function``/``tool`` for old-style
  function results) → user. Parts marked ``thought: true`` are history the upstream cannot use and are
  skipped; unknown part kinds (``executableCode``, ``videoMetadata``…) too.
* A user turn becomes its ``tool`` messages first (one per ``functionResponse``, in order), then one
  user message with the rest: text only → one string (parts joined with ``\\n``); with images → parts
  in the client's order. ``inlineData`` images → ``data:`` URLs; text ``inlineData`` (``text/*``, JSON)
  is decoded and inlined; ``fileData`` with an http(s) URI → ``image_url``; other media (PDF, audio,
  video, Files API URIs) → a clear 400 before routing.
* A model turn becomes one assistant message: its texts (joined as they are) plus one tool call per
  ``functionCall`` (id kept, else ``call_<content index>_<n>``; ``args`` → JSON; ``thoughtSignature``
  kept as the call's ``thought_signature`` so a Gemini upstream gets it back).
* A ``functionResponse`` is paired with its call: its ``id``, else the oldest call of that name not
  yet answered (FIFO; responses with an id in the same turn claim theirs first), else ``call_<n>``. ``response`` becomes the tool message's text (a lone string
  ``output``/``result``/``content`` field is unwrapped, ``error`` is prefixed ``Error:``, anything
  else is JSON).
* ``tools[].functionDeclarations`` → functions; ``parameters`` (Gemini's Schema: ``OBJECT``,
  ``nullable``…) is normalised to JSON Schema; ``parametersJsonSchema`` is used as is (type names
  lower-cased). Other tools (``googleSearch``…) are dropped. ``toolConfig.functionCallingConfig.mode``:
  ``AUTO``/``VALIDATED`` → auto, ``NONE`` → none, ``ANY`` → required, or that function when exactly
  one ``allowedFunctionNames`` is given.
* ``generationConfig``: temperature, topP, topK, seed, presence/frequencyPenalty, stopSequences (first
  4) forwarded; ``maxOutputTokens`` → ``max_tokens`` (absent → the configured default, 8192);
  ``candidateCount`` > 1 → 400; ``responseMimeType: application/json`` + ``responseSchema`` |
  ``responseJsonSchema`` → ``response_format`` json_schema ``gemini_response`` (without a schema:
  json_object); ``thinkingConfig`` → ``reasoning_effort`` (:func:`thinking_effort`).
* The model goes through :func:`resolve_model`: Gemini names never 404.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import deque
from typing import Any

import orjson

from freellm.core.request import ChatRequest, ReasoningEffort, parse_chat_request
from freellm.core.validation import invalid_request
from freellm.routing.catalog import Catalog
from freellm.routing.family_map import longest_family, resolve_mapped
from freellm.surfaces.gemini_wire.wire import (
    Content,
    FunctionDeclaration,
    GenerateContentRequest,
    GenerationConfig,
    Part,
    ThinkingConfig,
)

__all__ = [
    "IMAGE_TOKENS",
    "classify_family",
    "count_tokens",
    "include_thoughts",
    "json_schema",
    "resolve_model",
    "strip_model_prefix",
    "thinking_effort",
    "to_chat_body",
    "to_chat_request",
]

IMAGE_TOKENS = 258
"""Gemini's flat token figure for an image (``:countTokens``)."""

_DEFAULT_NAMES = frozenset({"", "auto", "default"})
_MAX_STOP = 4
_LEVELS: dict[str, ReasoningEffort] = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}
_TEXT_MIME = re.compile(
    r"^(text/[\w.+-]+|application/(json|xml|x-yaml|yaml|javascript|x-sh|x-python))(;.*)?$"
)
_UNWRAP_KEYS = ("output", "result", "content")


# ---- model ------------------------------------------------------------------------------------------


def strip_model_prefix(name: str) -> str:
    """``models/gemini-2.5-flash`` → ``gemini-2.5-flash`` (the SDKs and the URL may carry the prefix)."""
    name = name.strip()
    return name[len("models/") :] if name.startswith("models/") else name


def classify_family(name: str, model_map: dict[str, str]) -> str:
    """The ``model_map`` family a requested name belongs to (``default`` when none): the longest family
    key contained in the lower-cased name (``flash-lite`` beats ``flash``), or any key the operator
    added."""
    return longest_family(name, model_map, default_names=_DEFAULT_NAMES)


def resolve_model(requested: str | None, catalog: Catalog, model_map: dict[str, str]) -> str:
    """The model to route to for a Gemini model name. Never raises: unknown names become ``auto``.

    A name (``models/`` stripped) that is a configured route, group or ``auto`` is used as is; anything
    else is classified into a family and looked up in ``model_map`` (whose target falls back to
    ``auto`` when it is not routable either).
    """
    name = strip_model_prefix(requested or "")
    return resolve_mapped(name, classify_family(name, model_map), catalog, model_map)


# ---- schemas ------------------------------------------------------------------------------------------

_SNAKE = re.compile(r"_([a-z])")
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_SCHEMA_ONE = frozenset({"items", "additionalProperties", "not", "contains", "propertyNames"})
_SCHEMA_LIST = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_GEMINI_ONLY = frozenset({"propertyOrdering", "nullable"})


def _type_name(value: Any) -> Any:
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, list):
        return [v.lower() if isinstance(v, str) else v for v in value]
    return value


def json_schema(node: Any, *, gemini: bool) -> Any:
    """A schema as JSON Schema. ``gemini=True`` reads Gemini's OpenAPI-subset ``Schema``: keys may be
    snake_case (``any_of``), ``type`` is upper-case (``OBJECT``), ``nullable: true`` becomes
    ``type: [t, "null"]``, ``propertyOrdering`` is dropped. Type names are lower-cased either way;
    property names and literal values (``enum``, ``default``, ``example``) are never touched."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for raw_key, value in node.items():
        key = (
            _SNAKE.sub(lambda m: m.group(1).upper(), raw_key)
            if gemini and isinstance(raw_key, str)
            else raw_key
        )
        if key == "type":
            t = _type_name(value)
            if t == "type_unspecified":
                continue
            out["type"] = t
        elif gemini and key in _GEMINI_ONLY:
            continue
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: json_schema(sub, gemini=gemini) for name, sub in value.items()}
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = json_schema(value, gemini=gemini)
        elif key in _SCHEMA_LIST and isinstance(value, list):
            out[key] = [json_schema(sub, gemini=gemini) for sub in value]
        else:
            out[key] = value
    if gemini and node.get("nullable") is True:
        t = out.get("type")
        if isinstance(t, str) and t != "null":
            out["type"] = [t, "null"]
        elif isinstance(out.get("anyOf"), list):
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def _parameters(fn: FunctionDeclaration) -> dict[str, Any]:
    if fn.parameters_json_schema is not None:
        schema = json_schema(fn.parameters_json_schema, gemini=False)
    elif fn.parameters is not None:
        schema = json_schema(fn.parameters, gemini=True)
    else:
        schema = {"type": "object", "properties": {}}
    return schema if isinstance(schema, dict) else {"type": "object", "properties": {}}


# ---- thinking ---------------------------------------------------------------------------------------


def thinking_effort(config: ThinkingConfig | None) -> ReasoningEffort | None:
    """``thinkingConfig`` → ``reasoning_effort``. ``thinkingLevel`` (``MINIMAL``/``LOW``/``MEDIUM``/
    ``HIGH``, any case) wins; else ``thinkingBudget``: < 0 (dynamic) → unset, 0 → none, < 4096 low,
    < 16384 medium, else high."""
    if config is None:
        return None
    level = (config.thinking_level or "").strip().lower()
    if level in _LEVELS:
        return _LEVELS[level]
    budget = config.thinking_budget
    if budget is None or budget < 0:
        return None
    if budget == 0:
        return "none"
    if budget < 4096:
        return "low"
    if budget < 16384:
        return "medium"
    return "high"


def include_thoughts(req: GenerateContentRequest) -> bool:
    """Thought parts are returned only with ``thinkingConfig.includeThoughts: true`` (Gemini's rule)."""
    gc = req.generation_config
    tc = gc.thinking_config if gc is not None else None
    return bool(tc is not None and tc.include_thoughts)


# ---- contents ------------------------------------------------------------------------------------------


def _args_json(args: Any) -> str:
    if args is None:
        return "{}"
    return orjson.dumps(args if isinstance(args, dict) else {"value": args}).decode()


def _response_text(response: Any) -> str:
    if response is None:
        return ""
    if isinstance(response, str):
        return response
    if isinstance(response, dict) and len(response) == 1:
        ((key, value),) = response.items()
        if key in _UNWRAP_KEYS and isinstance(value, str):
            return value
        if key == "error" and isinstance(value, str):
            return value if value.lower().startswith("error") else f"Error: {value}"
    return orjson.dumps(response).decode()


class _Translator:
    """Walks ``contents`` once, pairing function responses with the calls before them."""

    def __init__(self) -> None:
        self.pending: dict[str, deque[str]] = {}
        self.orphans = 0

    def call_id(self, given: str | None, name: str, ci: int, n: int) -> str:
        call_id = given or f"call_{ci}_{n}"
        self.pending.setdefault(name, deque()).append(call_id)
        return call_id

    def claim(self, content: Content) -> None:
        """Responses that name their call's id claim it first, so id-less ones in the same turn pair
        with the calls that are really left."""
        for part in content.parts:
            fr = part.function_response
            if fr is not None and fr.id:
                queue = self.pending.get(fr.name)
                if queue is not None and fr.id in queue:
                    queue.remove(fr.id)

    def response_id(self, given: str | None, name: str) -> str:
        if given:
            return given
        queue = self.pending.get(name)
        if queue:
            return queue.popleft()
        out = f"call_{self.orphans}"
        self.orphans += 1
        return out

    @staticmethod
    def media_part(path: str, part: Part) -> dict[str, Any]:
        if part.inline_data is not None:
            blob = part.inline_data
            mime = blob.mime_type.strip().lower()
            if mime.startswith("image/"):
                return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{blob.data}"}}
            if _TEXT_MIME.match(mime):
                try:
                    text = base64.b64decode(blob.data, validate=True).decode("utf-8")
                except (binascii.Error, ValueError):
                    raise invalid_request(
                        [f"{path}.inlineData.data: Input should be base64-encoded UTF-8 text"], path
                    ) from None
                return {"type": "text", "text": text}
            raise invalid_request(
                [
                    f"{path}.inlineData: mimeType `{blob.mime_type[:64]}` cannot be forwarded to the routed "
                    "models (images and text are supported; send a document's text instead)"
                ],
                path,
            )
        assert part.file_data is not None
        fd = part.file_data
        uri = fd.file_uri.strip()
        mime = (fd.mime_type or "").strip().lower()
        if not uri.lower().startswith(("http://", "https://")):
            raise invalid_request(
                [
                    f"{path}.fileData.fileUri: only http(s) image URLs are supported "
                    "(Files API and gs:// URIs cannot be fetched by the routed models)"
                ],
                path,
            )
        if mime and not mime.startswith("image/"):
            raise invalid_request(
                [f"{path}.fileData: mimeType `{(fd.mime_type or '')[:64]}` is not supported (images only)"],
                path,
            )
        return {"type": "image_url", "image_url": {"url": uri}}

    def user_turn(self, ci: int, content: Content) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        has_image = False
        self.claim(content)
        for pi, part in enumerate(content.parts):
            path = f"contents.{ci}.parts.{pi}"
            if part.thought:
                continue
            if part.function_response is not None:
                fr = part.function_response
                tools.append(
                    {
                        "role": "tool",
                        "tool_call_id": self.response_id(fr.id, fr.name),
                        "name": fr.name,
                        "content": _response_text(fr.response),
                    }
                )
            elif part.text is not None:
                if part.text:
                    parts.append({"type": "text", "text": part.text})
            elif part.inline_data is not None or part.file_data is not None:
                media = self.media_part(path, part)
                has_image = has_image or media["type"] == "image_url"
                parts.append(media)
        out = tools
        if has_image:
            out.append({"role": "user", "content": parts})
        elif parts:
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts)})
        return out

    def model_turn(self, ci: int, content: Content) -> dict[str, Any] | None:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in content.parts:
            if part.thought:
                continue
            if part.function_call is not None:
                fc = part.function_call
                call: dict[str, Any] = {
                    "id": self.call_id(fc.id, fc.name, ci, len(calls)),
                    "type": "function",
                    "function": {"name": fc.name, "arguments": _args_json(fc.args)},
                }
                if part.thought_signature:
                    call["thought_signature"] = part.thought_signature
                calls.append(call)
            elif part.text:
                texts.append(part.text)
        if not texts and not calls:
            return None
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
        if calls:
            msg["tool_calls"] = calls
        return msg


def _system_text(si: Content | str | None) -> str:
    if si is None:
        return ""
    if isinstance(si, str):
        return si
    return "\n".join(p.text for p in si.parts if p.text and not p.thought)


def _role(ci: int, role: str | None) -> str:
    r = (role or "user").strip().lower()
    if r in ("user", "function", "tool", ""):
        return "user"
    if r in ("model", "assistant"):
        return "model"
    raise invalid_request([f"contents.{ci}.role: Input should be 'user' or 'model'"], f"contents.{ci}.role")


def _messages(req: GenerateContentRequest) -> list[dict[str, Any]]:
    tr = _Translator()
    messages: list[dict[str, Any]] = []
    for ci, content in enumerate(req.contents):
        if _role(ci, content.role) == "model":
            msg = tr.model_turn(ci, content)
            if msg is not None:
                messages.append(msg)
        else:
            messages.extend(tr.user_turn(ci, content))
    if not messages:
        raise invalid_request(
            ["contents: at least one content must have a text, image or function call/response part"],
            "contents",
        )
    system = _system_text(req.system_instruction)
    if system:
        messages.insert(0, {"role": "system", "content": system})
    return messages


# ---- tools ----------------------------------------------------------------------------------------------


def _tools(req: GenerateContentRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in req.tools or ():
        for fn in tool.function_declarations or ():
            spec: dict[str, Any] = {"name": fn.name, "parameters": _parameters(fn)}
            if fn.description:
                spec["description"] = fn.description
            out.append({"type": "function", "function": spec})
    return out


def _tool_choice(req: GenerateContentRequest, names: set[str]) -> str | dict[str, Any] | None:
    cfg = req.tool_config.function_calling_config if req.tool_config is not None else None
    if cfg is None or cfg.mode is None:
        return None
    mode = cfg.mode.strip().upper()
    if mode in ("AUTO", "VALIDATED"):
        return "auto"
    if mode == "NONE":
        return "none"
    if mode == "ANY":
        allowed = [n for n in cfg.allowed_function_names or () if n in names]
        if len(allowed) == 1:
            return {"type": "function", "function": {"name": allowed[0]}}
        return "required"
    if mode == "MODE_UNSPECIFIED":
        return None
    raise invalid_request(
        ["toolConfig.functionCallingConfig.mode: Input should be 'AUTO', 'ANY', 'NONE' or 'VALIDATED'"],
        "toolConfig.functionCallingConfig.mode",
    )


# ---- generation config ------------------------------------------------------------------------------


def _response_format(gc: GenerationConfig) -> dict[str, Any] | None:
    mime = (gc.response_mime_type or "").strip().lower()
    schema: Any = None
    if gc.response_json_schema is not None:
        schema = json_schema(gc.response_json_schema, gemini=False)
    elif gc.response_schema is not None:
        schema = json_schema(gc.response_schema, gemini=True)
    if mime == "application/json" or (not mime and schema is not None):
        if isinstance(schema, dict):
            return {"type": "json_schema", "json_schema": {"name": "gemini_response", "schema": schema}}
        return {"type": "json_object"}
    return None


def _generation(gc: GenerationConfig | None, body: dict[str, Any], default_max_tokens: int | None) -> None:
    max_tokens = default_max_tokens
    if gc is None:
        if max_tokens is not None and max_tokens > 0:
            body["max_tokens"] = max_tokens
        return
    if gc.candidate_count is not None and gc.candidate_count > 1:
        raise invalid_request(
            ["generationConfig.candidateCount: only one candidate is supported"],
            "generationConfig.candidateCount",
        )
    if gc.max_output_tokens is not None and gc.max_output_tokens > 0:
        max_tokens = gc.max_output_tokens
    if max_tokens is not None and max_tokens > 0:
        body["max_tokens"] = max_tokens
    if gc.temperature is not None:
        body["temperature"] = gc.temperature
    if gc.top_p is not None:
        body["top_p"] = gc.top_p
    if gc.top_k is not None:
        k = gc.top_k
        if isinstance(k, float):
            if not k.is_integer() or k < 0:
                raise invalid_request(
                    ["generationConfig.topK: Input should be a whole number ≥ 0"], "generationConfig.topK"
                )
            k = int(k)
        if k < 0:
            raise invalid_request(
                ["generationConfig.topK: Input should be a whole number ≥ 0"], "generationConfig.topK"
            )
        if k >= 1:
            body["top_k"] = k
    stops = [s for s in gc.stop_sequences or () if s]
    if stops:
        body["stop"] = stops[:_MAX_STOP]
    if gc.seed is not None:
        body["seed"] = gc.seed
    if gc.presence_penalty is not None:
        body["presence_penalty"] = gc.presence_penalty
    if gc.frequency_penalty is not None:
        body["frequency_penalty"] = gc.frequency_penalty
    fmt = _response_format(gc)
    if fmt is not None:
        body["response_format"] = fmt
    effort = thinking_effort(gc.thinking_config)
    if effort is not None:
        body["reasoning_effort"] = effort


# ---- the body -----------------------------------------------------------------------------------------


def to_chat_body(
    req: GenerateContentRequest, model: str, *, stream: bool, default_max_tokens: int | None = 8192
) -> dict[str, Any]:
    """The canonical chat body for a validated Gemini request (raises ClientError for bad media).

    A stream always asks for usage (``stream_options.include_usage``): the last Gemini chunk carries
    ``usageMetadata``.
    """
    body: dict[str, Any] = {"model": model, "messages": _messages(req), "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    tools = _tools(req)
    choice = _tool_choice(req, {t["function"]["name"] for t in tools})  # validated even without tools
    if tools:
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    _generation(req.generation_config, body, default_max_tokens)
    return body


def to_chat_request(
    req: GenerateContentRequest, model: str, *, stream: bool, default_max_tokens: int | None = 8192
) -> ChatRequest:
    """:func:`to_chat_body` validated into the canonical :class:`ChatRequest`."""
    return parse_chat_request(to_chat_body(req, model, stream=stream, default_max_tokens=default_max_tokens))


# ---- countTokens ----------------------------------------------------------------------------------------


def _chars_tokens(n: int) -> int:
    return (n + 3) // 4 if n > 0 else 0


def count_tokens(contents: list[Content], req: GenerateContentRequest | None = None) -> int:
    """The ``:countTokens`` estimate: ceil(chars/4) of the system instruction and of every text part,
    258 per image, the JSON of function calls/responses/4 and of the tool declarations/4."""
    total = 0
    if req is not None:
        total += _chars_tokens(len(_system_text(req.system_instruction)))
        if req.tools:
            decls = [
                fn.model_dump(mode="json", by_alias=True, exclude_none=True)
                for tool in req.tools
                for fn in tool.function_declarations or ()
            ]
            if decls:
                total += _chars_tokens(len(orjson.dumps(decls)))
    for content in contents:
        for part in content.parts:
            if part.text and not part.thought:
                total += _chars_tokens(len(part.text))
            elif part.inline_data is not None or part.file_data is not None:
                total += IMAGE_TOKENS
            elif part.function_call is not None:
                total += _chars_tokens(
                    len(orjson.dumps(part.function_call.model_dump(mode="json", exclude_none=True)))
                )
            elif part.function_response is not None:
                total += _chars_tokens(
                    len(orjson.dumps(part.function_response.model_dump(mode="json", exclude_none=True)))
                )
    return total
