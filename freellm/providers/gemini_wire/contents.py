"""Canonical messages → Gemini ``systemInstruction`` text and ``contents`` turns with their parts.

Decisions (also in ``docs/providers.md``):

* **system**: every system (or developer) message, wherever it sits, is collected for
  ``systemInstruction``; :mod:`.request` joins them and decides where they go.
* **signed reasoning**: an assistant message with ``reasoning_content`` **and** ``reasoning_signature``
  (both non-empty strings) gets a thought part ``{"text", "thought": true, "thoughtSignature"}`` before
  its text; reasoning without a signature is not sent (Gemini has no use for unsigned thoughts).
* **turns**: ``assistant`` → ``model``; ``tool`` results → ``functionResponse`` parts of a user turn;
  consecutive same-role turns are merged (so parallel tool results are one user turn, as Gemini wants).
  Empty text is dropped; an empty turn is dropped.
* **tool calls** → ``functionCall {name, args}`` parts: ``args`` is the JSON-parsed arguments (an object;
  anything else is wrapped ``{"value": …}``). Each part gets its ``thoughtSignature``: the client's own
  (``thought_signature``/``thoughtSignature``/``extra_content.google.thought_signature`` on the tool
  call), else the one remembered for the call id, else for name + arguments; on models that require
  signatures (Gemini 3 and later), a model turn whose calls have none gets Google's documented
  ``skip_thought_signature_validator`` sentinel on its first call (:func:`apply_signatures`). The call
  ``id`` is sent only when Gemini itself issued it.
* **tool results** → ``functionResponse {name, response}``: the name is recovered from the assistant call
  with that ``tool_call_id`` (tool messages carry only the id), else the message's ``name``; the content is
  JSON-parsed when it is a JSON object, otherwise wrapped ``{"output": …}`` (Google's documented key).
  Images in a tool result follow the responses as ``inlineData`` parts.

Parts carry two bookkeeping keys (:data:`CALL_ID`, :data:`NATIVE`) while the request is built, for
:mod:`.pairing`; :func:`clean_content` removes them before the body is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.providers.gemini_wire.media import InlineData, audio_inline, data_url_inline, image_inline
from freellm.providers.gemini_wire.models import needs_thought_signatures
from freellm.providers.gemini_wire.signatures import SKIP_SIGNATURE, SignatureCache

__all__ = [
    "CALL_ID",
    "NATIVE",
    "Content",
    "Part",
    "append_parts",
    "apply_signatures",
    "clean_content",
    "merge_adjacent",
    "translate_messages",
]

Part = dict[str, Any]
Content = dict[str, Any]  # {"role": "user" | "model", "parts": list[Part]}
# Internal bookkeeping keys on parts, removed before the body leaves this module.
CALL_ID: Final = "_call_id"
NATIVE: Final = "_native"


def translate_messages(
    messages: list[Any], media: Mapping[str, InlineData], signatures: SignatureCache | None
) -> tuple[list[str], list[Content]]:
    """The system texts and the turns of ``messages`` (bookkeeping keys still on the parts)."""
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
            append_parts(contents, "user", _user_parts(content, media))
        elif role == "assistant":
            parts: list[Part] = _thought_parts(msg)
            text = _joined_text(content)
            if text:
                parts.append({"text": text})
            for call in msg.get("tool_calls") or ():
                part = _function_call(call, signatures)
                if part is not None:
                    parts.append(part)
                    call_names[part[CALL_ID]] = part["functionCall"]["name"]
            append_parts(contents, "model", parts)
        elif role == "tool":
            append_parts(contents, "user", _tool_result(msg, call_names, media, signatures))
    return system, contents


def append_parts(contents: list[Content], role: str, parts: list[Part]) -> None:
    """Add ``parts`` as a ``role`` turn, merged into the last turn when it has the same role."""
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def merge_adjacent(contents: list[Content]) -> list[Content]:
    """The turns with consecutive same-role turns merged."""
    out: list[Content] = []
    for content in contents:
        append_parts(out, content["role"], list(content["parts"]))
    return out


def _thought_parts(msg: Mapping[str, Any]) -> list[Part]:
    """The signed reasoning of an assistant message as one thought part (none without a signature)."""
    reasoning, signature = msg.get("reasoning_content"), msg.get("reasoning_signature")
    if isinstance(reasoning, str) and reasoning and isinstance(signature, str) and signature:
        return [{"text": reasoning, "thought": True, "thoughtSignature": signature}]
    return []


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
            inline = image_inline(part, media)
            if inline is not None:
                parts.append({"inlineData": inline})
        elif kind == "input_audio":
            inline = audio_inline(part.get("input_audio"))
            if inline is not None:
                parts.append({"inlineData": inline})
        elif kind == "file":
            file = part.get("file")
            data = file.get("file_data") if isinstance(file, Mapping) else None
            inline = data_url_inline(data) if isinstance(data, str) else None
            if inline is not None:
                parts.append({"inlineData": inline})
        else:
            text = part.get("text")
            if isinstance(text, str) and text and kind in (None, "text", "input_text"):
                parts.append({"text": text})
    return parts


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
    part: Part = {"functionCall": body, CALL_ID: call_id, NATIVE: native}
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
    return [{"functionResponse": body, CALL_ID: call_id, NATIVE: native}, *images]


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


def apply_signatures(contents: list[Content], model: str, signatures: SignatureCache | None) -> None:
    """The sentinel on the first call of a model turn whose calls carry no signature (Gemini 3+)."""
    if not needs_thought_signatures(model):
        return
    for content in contents:
        if content["role"] != "model":
            continue
        calls = [p for p in content["parts"] if "functionCall" in p]
        if calls and not any(p.get("thoughtSignature") for p in calls):
            calls[0]["thoughtSignature"] = SKIP_SIGNATURE


def clean_content(content: Content) -> Content:
    """The turn without the bookkeeping keys, as it is sent."""
    parts = []
    for part in content["parts"]:
        if CALL_ID in part or NATIVE in part:
            part = {k: v for k, v in part.items() if k not in (CALL_ID, NATIVE)}
        parts.append(part)
    return {"role": content["role"], "parts": parts}
