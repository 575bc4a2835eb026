"""Canonical (OpenAI chat) request body → Gemini ``generateContent`` request body.

The input is what :meth:`freellm.core.request.ChatRequest.upstream_body` builds (normalised messages:
system/user/assistant/tool roles only, every tool call with an id). The output is a body the Gemini API
accepts (it 400s on unknown fields, so only what has a Gemini equivalent is sent). Pure: remote images
are fetched by the provider beforehand and handed in as ``media``; signatures come from the provider's
:class:`~freellm.providers.gemini_wire.signatures.SignatureCache`.

Decisions (also in ``docs/providers.md``):

* **system**: every system message (wherever it sits) is joined with blank lines into
  ``systemInstruction``. Gemma models refuse system instructions ("Developer instruction is not
  enabled"), so for them the text is the first user turn instead.
* **turns**: ``assistant`` → ``model``; ``tool`` results → ``functionResponse`` parts of a user turn;
  consecutive same-role turns are merged (so parallel tool results are one user turn, as Gemini wants);
  in a user turn the function responses come first, in the order of the calls they answer. A
  conversation that opens with a model turn gets a ``"."`` user turn in front; one with no turns sends
  the system text (or ``"."``) as the user turn. Empty text is dropped; an empty turn is dropped.
* **tool calls** → ``functionCall {name, args}`` parts: ``args`` is the JSON-parsed arguments (an object;
  anything else is wrapped ``{"value": …}``). Each part gets its ``thoughtSignature``: the client's own
  (``thought_signature``/``thoughtSignature``/``extra_content.google.thought_signature`` on the tool
  call), else the one remembered for the call id, else for name + arguments; on models that require
  signatures (Gemini 3 and later), a model turn whose calls have none gets Google's documented
  ``skip_thought_signature_validator`` sentinel on its first call. The call ``id`` is sent only when
  Gemini itself issued it.
* **tool results** → ``functionResponse {name, response}``: the name is recovered from the assistant call
  with that ``tool_call_id`` (tool messages carry only the id), else the message's ``name``; the content is
  JSON-parsed when it is a JSON object, otherwise wrapped ``{"output": …}`` (Google's documented key).
  Images in a tool result follow the responses as ``inlineData`` parts.
* **pairing** (Gemini 400s when "the number of function response parts is not equal to the number of
  function call parts"): a call without a result gets a ``{"output": "(no result)"}`` response; a
  result whose call is not in the previous model turn is sent as text. History with function calls
  while no ``tools`` are declared gets placeholder declarations of the called names and mode ``NONE``.
* **images**: ``data:`` URLs → ``inlineData {mimeType, data}``; http(s) URLs → the bytes the provider
  fetched (``media``), or dropped when the fetch failed or was refused; ``input_audio`` and ``file`` parts
  with a data URL → ``inlineData`` too. Anything else is dropped.
* **tools**: a function named ``google_search``/``googlesearch``/``google_search_retrieval`` becomes
  native Search grounding (``{googleSearch: {}}``); the others become ``functionDeclarations`` with
  sanitised ``parameters`` (:mod:`.schema`; no ``parameters`` for a function without arguments).
  ``tool_choice`` → ``toolConfig.functionCallingConfig``: ``auto`` → AUTO, ``required`` → ANY, ``none`` →
  NONE, a named function → ANY + ``allowedFunctionNames``; only sent with declarations.
* **response_format** (only without function declarations — Gemini refuses JSON mode with function
  calling — and not for Gemma, which has no JSON mode): ``json_object`` → ``responseMimeType:
  application/json``; ``json_schema`` → the same plus a sanitised ``responseSchema``. Otherwise it becomes
  an instruction in the system text.
* **thinking** (``reasoning_effort``): Gemini 2.x ``thinkingBudget`` none/minimal 0 (2.5 Pro cannot turn
  thinking off: 128), low 1024, medium 8192, high 24576; Gemini 3 and later ``thinkingLevel`` (Flash:
  minimal/low/medium/high, Pro: low/high); ``includeThoughts: true`` whenever thinking is asked for; no
  ``thinkingConfig`` at all for Gemma or without ``reasoning_effort``. Gemini counts thought tokens in
  ``maxOutputTokens``, so with thinking on the budget is added to the client's ``max_tokens``.
* **sampling**: ``temperature``, ``top_p`` → ``topP``, ``top_k`` → ``topK``, ``max_tokens`` (or
  ``max_completion_tokens``) → ``maxOutputTokens``, ``stop`` → ``stopSequences`` (at most 5, empty ones
  dropped), ``seed``, ``presence_penalty``/``frequency_penalty`` → ``presencePenalty``/
  ``frequencyPenalty``. Not sent: ``min_p``, ``repetition_penalty``, ``logit_bias``, ``logprobs``,
  ``top_logprobs``, ``n``, ``user``, ``parallel_tool_calls``, ``stream_options`` and unknown extras.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.providers.gemini_wire.schema import sanitize_parameters, sanitize_schema
from freellm.providers.gemini_wire.signatures import SKIP_SIGNATURE, SignatureCache

__all__ = [
    "MISSING_RESULT_TEXT",
    "OPENING_USER_TEXT",
    "THINKING_BUDGETS",
    "InlineData",
    "fetchable_urls",
    "is_gemma",
    "needs_thought_signatures",
    "sniff_image_type",
    "to_gemini_request",
]

InlineData = dict[str, str]
"""``{"mimeType": …, "data": <base64>}``."""
Part = dict[str, Any]
Content = dict[str, Any]  # {"role": "user" | "model", "parts": list[Part]}

THINKING_BUDGETS: Final[dict[str, int]] = {
    "none": 0,
    "minimal": 0,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
}
"""``reasoning_effort`` → ``thinkingBudget`` (the reference data's Google quirk)."""
_PRO_MIN_BUDGET: Final = 128  # Gemini 2.5 Pro: "Budget 0 is invalid. This model only works in thinking mode."
_LEVELS_FLASH: Final = {
    "none": "minimal",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
_LEVELS_PRO: Final = {"none": "low", "minimal": "low", "low": "low", "medium": "high", "high": "high"}
_NO_THOUGHTS: Final = frozenset({"none", "minimal"})
MAX_STOP_SEQUENCES: Final = 5

OPENING_USER_TEXT: Final = "."
MISSING_RESULT_TEXT: Final = "(no result)"
PLACEHOLDER_TOOL_DESCRIPTION: Final = "A tool used earlier in this conversation."
SEARCH_TOOL_NAMES: Final = frozenset({"google_search", "googlesearch", "google_search_retrieval"})
_JSON_ONLY: Final = "Respond only with a single valid JSON object, with no text or markdown around it."

_DATA_URL: Final = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*),(.*)$", re.DOTALL)
_GEMINI_VERSION: Final = re.compile(r"gemini-(\d+)")
# Internal bookkeeping keys on parts, removed before the body leaves this module.
_CALL_ID: Final = "_call_id"
_NATIVE: Final = "_native"


def is_gemma(model: str) -> bool:
    """Gemma ids (``gemma-3-27b-it``, ``models/gemma-4-31b-it``) reject system instructions and thinking."""
    return "gemma" in model.lower()


def _major(model: str) -> int | None:
    m = _GEMINI_VERSION.search(model.lower())
    return int(m.group(1)) if m else None


def needs_thought_signatures(model: str) -> bool:
    """Gemini 3 and later refuse a replayed function call without a thought signature."""
    major = _major(model)
    return major is not None and major >= 3


def fetchable_urls(body: Mapping[str, Any]) -> list[str]:
    """The http(s) image URLs of a request (user and tool content), in order, without duplicates."""
    urls: list[str] = []
    for msg in body.get("messages") or ():
        if not isinstance(msg, Mapping) or msg.get("role") not in ("user", "tool"):
            continue
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            url = _image_url(part) if isinstance(part, Mapping) else None
            if url and url.startswith(("http://", "https://")) and url not in urls:
                urls.append(url)
    return urls


def to_gemini_request(
    body: Mapping[str, Any],
    *,
    signatures: SignatureCache | None = None,
    media: Mapping[str, InlineData] | None = None,
) -> dict[str, Any]:
    """Translate one canonical upstream body into a Gemini ``generateContent`` body (a new dict)."""
    model = body.get("model") if isinstance(body.get("model"), str) else ""
    assert isinstance(model, str)
    media = media or {}
    system, contents = _translate_messages(body.get("messages") or [], media, signatures)
    contents = _repair_pairing(contents)
    declarations, search = _translate_tools(body.get("tools"))
    if not declarations:
        called = _called_names(contents)
        if called:
            declarations = [{"name": n, "description": PLACEHOLDER_TOOL_DESCRIPTION} for n in called]
            tool_config: dict[str, Any] | None = {"functionCallingConfig": {"mode": "NONE"}}
        else:
            tool_config = None
    else:
        tool_config = _tool_config(body.get("tool_choice"), declarations)

    generation: dict[str, Any] = {}
    # Gemini refuses JSON mode next to function calling; Gemma refuses it altogether ("JSON mode is not
    # enabled"). Both get the format as an instruction instead.
    json_hint = _response_format(
        body.get("response_format"), generation, bool(declarations) or is_gemma(model)
    )
    if json_hint:
        system.append(json_hint)

    _apply_signatures(contents, model, signatures)
    system_text = "\n\n".join(t for t in system if t)
    if system_text and is_gemma(model):
        contents.insert(0, {"role": "user", "parts": [{"text": system_text}]})
        contents = _merge_adjacent(contents)
        system_text = ""
    if not contents:
        contents = [{"role": "user", "parts": [{"text": system_text or OPENING_USER_TEXT}]}]
        system_text = ""
    elif contents[0]["role"] != "user":
        contents.insert(0, {"role": "user", "parts": [{"text": OPENING_USER_TEXT}]})

    out: dict[str, Any] = {"contents": [_clean_content(c) for c in contents]}
    if system_text:
        out["systemInstruction"] = {"parts": [{"text": system_text}]}
    tools: list[dict[str, Any]] = []
    if declarations:
        tools.append({"functionDeclarations": declarations})
    if search:
        tools.append({"googleSearch": {}})
    if tools:
        out["tools"] = tools
    if tool_config is not None and declarations:
        out["toolConfig"] = tool_config
    _sampling(body, generation, model)
    if generation:
        out["generationConfig"] = generation
    return out


# ---- messages ------------------------------------------------------------------------------------


def _translate_messages(
    messages: list[Any], media: Mapping[str, InlineData], signatures: SignatureCache | None
) -> tuple[list[str], list[Content]]:
    system: list[str] = []
    contents: list[Content] = []
    call_names: dict[str, str] = {}
    for msg in messages:
        if not isinstance(msg, Mapping):
            continue
        role = msg.get("role")
        content = msg.get("content")
        if role in ("system", "developer"):
            text = _joined_text(content)
            if text:
                system.append(text)
        elif role == "user":
            _append(contents, "user", _user_parts(content, media))
        elif role == "assistant":
            parts: list[Part] = []
            text = _joined_text(content)
            if text:
                parts.append({"text": text})
            for call in msg.get("tool_calls") or ():
                part = _function_call(call, signatures)
                if part is not None:
                    parts.append(part)
                    call_names[part[_CALL_ID]] = part["functionCall"]["name"]
            _append(contents, "model", parts)
        elif role == "tool":
            _append(contents, "user", _tool_result(msg, call_names, media, signatures))
    return system, contents


def _append(contents: list[Content], role: str, parts: list[Part]) -> None:
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def _merge_adjacent(contents: list[Content]) -> list[Content]:
    out: list[Content] = []
    for content in contents:
        _append(out, content["role"], list(content["parts"]))
    return out


def _joined_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type") in (None, "text", "input_text", "output_text"):
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(t for t in texts if t)


def _user_parts(content: Any, media: Mapping[str, InlineData]) -> list[Part]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[Part] = []
    if not isinstance(content, list):
        return parts
    for part in content:
        if isinstance(part, str):
            if part:
                parts.append({"text": part})
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("image_url", "image", "input_image"):
            inline = _image_inline(part, media)
            if inline is not None:
                parts.append({"inlineData": inline})
        elif kind == "input_audio":
            inline = _audio_inline(part.get("input_audio"))
            if inline is not None:
                parts.append({"inlineData": inline})
        elif kind == "file":
            file = part.get("file")
            data = file.get("file_data") if isinstance(file, Mapping) else None
            inline = _data_url(data) if isinstance(data, str) else None
            if inline is not None:
                parts.append({"inlineData": inline})
        else:
            text = part.get("text")
            if isinstance(text, str) and text and kind in (None, "text", "input_text"):
                parts.append({"text": text})
    return parts


def _image_url(part: Mapping[str, Any]) -> str | None:
    ref = part.get("image_url")
    if ref is None:
        ref = part.get("url") or part.get("image")
    url = ref.get("url") if isinstance(ref, Mapping) else ref
    return url.strip() if isinstance(url, str) else None


def _image_inline(part: Mapping[str, Any], media: Mapping[str, InlineData]) -> InlineData | None:
    url = _image_url(part)
    if not url:
        return None
    if url.startswith("data:"):
        return _data_url(url)
    fetched = media.get(url)
    return dict(fetched) if fetched is not None else None


def _data_url(url: str) -> InlineData | None:
    m = _DATA_URL.match(url.strip())
    if not m:
        return None
    mime = (m.group(1) or "").strip().lower()
    params = m.group(2).lower()
    payload = m.group(3)
    if ";base64" in params:
        data = re.sub(r"\s+", "", payload)
        try:
            head = base64.b64decode(data[:24] + "=" * (-len(data[:24]) % 4), validate=False)
        except (binascii.Error, ValueError):
            return None
    else:
        raw = urllib.parse.unquote_to_bytes(payload)
        data = base64.b64encode(raw).decode()
        head = raw[:16]
    if not data:
        return None
    if not mime or mime == "application/octet-stream":
        mime = sniff_image_type(head) or "image/png"
    return {"mimeType": mime, "data": data}


def sniff_image_type(head: bytes) -> str | None:
    """The image MIME type of the first bytes of a file (PNG, JPEG, GIF, WebP, HEIC), or None."""
    if head.startswith(b"\x89PNG"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1"):
        return "image/heic"
    return None


def _audio_inline(audio: Any) -> InlineData | None:
    if not isinstance(audio, Mapping):
        return None
    data = audio.get("data")
    fmt = audio.get("format")
    if not isinstance(data, str) or not data:
        return None
    fmt = fmt.lower() if isinstance(fmt, str) and fmt else "wav"
    mime = {"mp3": "audio/mp3", "wav": "audio/wav"}.get(fmt, f"audio/{fmt}")
    return {"mimeType": mime, "data": data}


# ---- tool calls and results ----------------------------------------------------------------------


def _client_signature(call: Mapping[str, Any]) -> str | None:
    for key in ("thought_signature", "thoughtSignature"):
        value = call.get(key)
        if isinstance(value, str) and value:
            return value
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, Mapping) else None
    value = google.get("thought_signature") if isinstance(google, Mapping) else None
    return value if isinstance(value, str) and value else None


def _function_call(call: Any, signatures: SignatureCache | None) -> Part | None:
    if not isinstance(call, Mapping):
        return None
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        return None
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    call_id = call.get("id") if isinstance(call.get("id"), str) else ""
    arguments = fn.get("arguments")
    body: dict[str, Any] = {"name": name, "args": _args_object(arguments)}
    native = bool(signatures is not None and call_id and signatures.is_native_id(call_id))
    if native:
        body = {"id": call_id, **body}
    part: Part = {"functionCall": body, _CALL_ID: call_id, _NATIVE: native}
    signature = _client_signature(call)
    if signature is None and signatures is not None:
        signature = signatures.signature_for(call_id, name, arguments if arguments is not None else "{}")
    if signature:
        part["thoughtSignature"] = signature
    return part


def _args_object(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"value": arguments}
    return value if isinstance(value, dict) else {"value": value}


def _tool_result(
    msg: Mapping[str, Any],
    call_names: Mapping[str, str],
    media: Mapping[str, InlineData],
    signatures: SignatureCache | None,
) -> list[Part]:
    call_id = msg.get("tool_call_id") if isinstance(msg.get("tool_call_id"), str) else ""
    assert isinstance(call_id, str)
    name = call_names.get(call_id)
    if name is None:
        given = msg.get("name")
        name = given if isinstance(given, str) and given else ""
    content = msg.get("content")
    images: list[Part] = []
    if isinstance(content, list):
        text = _joined_text(content)
        images = [p for p in _user_parts(content, media) if "inlineData" in p]
    else:
        text = content if isinstance(content, str) else ""
    response = _response_object(text)
    body: dict[str, Any] = {"name": name, "response": response}
    native = bool(signatures is not None and call_id and signatures.is_native_id(call_id))
    if native:
        body = {"id": call_id, **body}
    return [{"functionResponse": body, _CALL_ID: call_id, _NATIVE: native}, *images]


def _response_object(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
    return {"output": text}


def _repair_pairing(contents: list[Content]) -> list[Content]:
    """Each model turn's calls answered (in order) at the start of the next user turn, nothing else."""
    out: list[Content] = []
    pending: list[Part] = []  # functionCall parts of the previous model turn
    for content in contents:
        if content["role"] == "model":
            if pending:
                _append(out, "user", _placeholders(pending))
            _append(out, "model", content["parts"])
            pending = [p for p in content["parts"] if "functionCall" in p]
            continue
        responses: dict[int, Part] = {}
        others: list[Part] = []
        for part in content["parts"]:
            if "functionResponse" not in part:
                others.append(part)
                continue
            slot = next(
                (
                    i
                    for i, call in enumerate(pending)
                    if i not in responses and call[_CALL_ID] and call[_CALL_ID] == part[_CALL_ID]
                ),
                None,
            )
            if slot is None:
                # Same name, id unknown (a client that lost ids): answer the first open call of that name.
                slot = next(
                    (
                        i
                        for i, call in enumerate(pending)
                        if i not in responses
                        and not part[_CALL_ID]
                        and call["functionCall"]["name"] == part["functionResponse"]["name"]
                    ),
                    None,
                )
            if slot is None:
                others.append(_result_as_text(part))
            else:
                call = pending[slot]
                fr = part["functionResponse"]
                fr["name"] = call["functionCall"]["name"]
                responses[slot] = part
        ordered: list[Part] = []
        for i, call in enumerate(pending):
            ordered.append(responses[i] if i in responses else _placeholders([call])[0])
        _append(out, "user", ordered + others)
        pending = []
    if pending:
        _append(out, "user", _placeholders(pending))
    return out


def _placeholders(calls: list[Part]) -> list[Part]:
    out: list[Part] = []
    for call in calls:
        body: dict[str, Any] = {
            "name": call["functionCall"]["name"],
            "response": {"output": MISSING_RESULT_TEXT},
        }
        if call.get(_NATIVE):
            body = {"id": call[_CALL_ID], **body}
        out.append({"functionResponse": body, _CALL_ID: call[_CALL_ID], _NATIVE: call.get(_NATIVE, False)})
    return out


def _result_as_text(part: Part) -> Part:
    fr = part["functionResponse"]
    response = fr.get("response")
    if isinstance(response, dict) and set(response) == {"output"} and isinstance(response["output"], str):
        text = response["output"]
    else:
        text = orjson.dumps(response).decode()
    label = fr.get("name") or part.get(_CALL_ID) or "tool"
    return {"text": f"[tool result {label}]\n{text}".rstrip()}


def _called_names(contents: list[Content]) -> list[str]:
    names: list[str] = []
    for content in contents:
        for part in content["parts"]:
            for key in ("functionCall", "functionResponse"):
                inner = part.get(key)
                if isinstance(inner, dict):
                    name = inner.get("name")
                    if isinstance(name, str) and name and name not in names:
                        names.append(name)
    return names


def _apply_signatures(contents: list[Content], model: str, signatures: SignatureCache | None) -> None:
    """The sentinel on the first call of a model turn whose calls carry no signature (Gemini 3+)."""
    if not needs_thought_signatures(model):
        return
    for content in contents:
        if content["role"] != "model":
            continue
        calls = [p for p in content["parts"] if "functionCall" in p]
        if calls and not any(p.get("thoughtSignature") for p in calls):
            calls[0]["thoughtSignature"] = SKIP_SIGNATURE


def _clean_content(content: Content) -> Content:
    parts = []
    for part in content["parts"]:
        if _CALL_ID in part or _NATIVE in part:
            part = {k: v for k, v in part.items() if k not in (_CALL_ID, _NATIVE)}
        parts.append(part)
    return {"role": content["role"], "parts": parts}


# ---- tools ---------------------------------------------------------------------------------------


def _translate_tools(tools: Any) -> tuple[list[dict[str, Any]], bool]:
    declarations: list[dict[str, Any]] = []
    search = False
    if not isinstance(tools, list):
        return declarations, search
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        if name.lower() in SEARCH_TOOL_NAMES:
            search = True
            continue
        if name in seen:
            continue
        seen.add(name)
        entry: dict[str, Any] = {"name": name}
        description = fn.get("description")
        if isinstance(description, str) and description:
            entry["description"] = description
        params = sanitize_parameters(fn.get("parameters"))
        if params is not None:
            entry["parameters"] = params
        declarations.append(entry)
    return declarations, search


def _tool_config(choice: Any, declarations: list[dict[str, Any]]) -> dict[str, Any] | None:
    config: dict[str, Any]
    if choice == "auto":
        config = {"mode": "AUTO"}
    elif choice in ("required", "any"):
        config = {"mode": "ANY"}
    elif choice == "none":
        config = {"mode": "NONE"}
    elif isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        config = {"mode": "ANY"}
        if isinstance(name, str) and any(d["name"] == name for d in declarations):
            config["allowedFunctionNames"] = [name]
    else:
        return None
    return {"functionCallingConfig": config}


# ---- generation config ---------------------------------------------------------------------------


def _response_format(fmt: Any, generation: dict[str, Any], as_text: bool) -> str | None:
    """Set JSON mode on ``generation``; with ``as_text`` return a system-text hint instead."""
    if not isinstance(fmt, Mapping):
        return None
    kind = fmt.get("type")
    if kind not in ("json_object", "json_schema"):
        return None
    schema: Any = None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if as_text:
        if isinstance(schema, Mapping) and schema:
            return f"{_JSON_ONLY} It must match this JSON schema: {orjson.dumps(schema).decode()}"
        return _JSON_ONLY
    generation["responseMimeType"] = "application/json"
    if isinstance(schema, Mapping) and schema:
        clean = sanitize_schema(schema)
        if clean and not (clean.get("type") == "object" and "properties" not in clean):
            generation["responseSchema"] = clean
    return None


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _sampling(body: Mapping[str, Any], generation: dict[str, Any], model: str) -> None:
    for src, dst in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ):
        value = _number(body.get(src))
        if value is not None:
            generation[dst] = value
    for src, dst in (("top_k", "topK"), ("seed", "seed")):
        value = body.get(src)
        if isinstance(value, int) and not isinstance(value, bool):
            generation[dst] = value
    stop = body.get("stop")
    seqs = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    seqs = [s for s in seqs if isinstance(s, str) and s][:MAX_STOP_SEQUENCES]
    if seqs:
        generation["stopSequences"] = seqs

    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        max_tokens = body.get("max_completion_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        max_tokens = None
    thinking, extra = _thinking(body.get("reasoning_effort"), model)
    if max_tokens is not None:
        generation["maxOutputTokens"] = max_tokens + extra
    if thinking is not None:
        generation["thinkingConfig"] = thinking


def _thinking(effort: Any, model: str) -> tuple[dict[str, Any] | None, int]:
    """``(thinkingConfig, tokens to add to maxOutputTokens)`` for a ``reasoning_effort``."""
    if not isinstance(effort, str) or effort not in THINKING_BUDGETS or is_gemma(model):
        return None, 0
    lowered = model.lower()
    major = _major(model)
    config: dict[str, Any]
    extra = THINKING_BUDGETS[effort]
    if major is not None and major >= 3:
        levels = _LEVELS_PRO if "-pro" in lowered else _LEVELS_FLASH
        config = {"thinkingLevel": levels[effort]}
    else:
        budget = THINKING_BUDGETS[effort]
        if budget == 0 and "2.5-pro" in lowered:
            budget = _PRO_MIN_BUDGET
        config = {"thinkingBudget": budget}
        extra = budget
    if effort not in _NO_THOUGHTS:
        config["includeThoughts"] = True
    return config, extra
