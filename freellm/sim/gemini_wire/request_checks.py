"""Checking a ``generateContent`` request the way the Gemini API does: the body, the turns and their parts.

The simulator refuses what Google refuses, with Google's wording, so a gateway that translates badly
gets the 400 ``INVALID_ARGUMENT`` the real API would send and the bug shows up in tests rather than in
production. This module owns the request as a whole and the conversation rules: unknown fields anywhere
(``Unknown name "x"``), missing or empty ``contents``/``parts``, roles other than user/model, a part with
no or two data fields, empty text, bad ``inlineData``, function calls outside model turns or not right
after a user turn, function responses whose count differs from the calls they answer, a Gemini 3
function call of the current tool loop without ``thoughtSignature``, and system instructions or JSON
mode for Gemma. The configuration blocks (``tools``, ``toolConfig``, ``generationConfig``, schemas) are
checked by :mod:`.config_checks`.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final

from freellm.sim.gemini_wire.config_checks import check_generation, check_tool_config, check_tools
from freellm.sim.gemini_wire.fields import FUNCTION_NAME, field_of, has_field, invalid, unknown_field
from freellm.sim.wire import WireRequestError

__all__ = ["check_request"]

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
_MISSING_SIGNATURE: Final = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to "
    "work correctly, and missing thought_signature may lead to degraded model performance. Additional "
    "data, function call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)


def _needs_signatures(model: str) -> bool:
    """Gemini 3 and later refuse a function call of the current tool loop without a thought signature."""
    m = re.search(r"gemini-(\d+)", model.lower())
    return m is not None and int(m.group(1)) >= 3


def check_request(body: Any, model: str) -> None:
    """Check a decoded request body for ``model``; raise :class:`WireRequestError` with Gemini's wording."""
    if not isinstance(body, dict):
        raise WireRequestError("Invalid JSON payload received. Expected an object.")
    for key in body:
        if key not in _TOP_LEVEL:
            raise unknown_field(key)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise invalid("contents", "contents is not specified")
    system = field_of(body, "systemInstruction", "system_instruction")
    if system is not None:
        if not isinstance(system, dict):
            raise WireRequestError("Invalid value at 'system_instruction': expected an object")
        if "gemma" in model.lower():
            raise WireRequestError(f"Developer instruction is not enabled for models/{model}")
        _check_parts(system.get("parts"), "system_instruction", "user")
    declared = check_tools(body.get("tools"))
    check_tool_config(field_of(body, "toolConfig", "tool_config"), declared)
    generation = field_of(body, "generationConfig", "generation_config")
    check_generation(generation, bool(declared))
    json_mode = isinstance(generation, dict) and (
        field_of(generation, "responseMimeType", "response_mime_type") == "application/json"
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
                raise unknown_field(key, where)
        role = content.get("role") or "user"
        if role not in ("user", "model"):
            raise WireRequestError("Please use a valid role: user, model.")
        parts = content.get("parts")
        _check_parts(parts, where, role)
        assert isinstance(parts, list)
        roles.append(role)
        calls_per_turn.append([p for p in parts if has_field(p, "functionCall")])
        responses_per_turn.append(sum(1 for p in parts if has_field(p, "functionResponse")))
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
            if roles[i] == "user" and any(not has_field(p, "functionResponse") for p in parts):
                start = i + 1
        for i in range(start, len(contents)):
            calls = calls_per_turn[i]
            if not calls:
                continue
            first = calls[0]
            if not field_of(first, "thoughtSignature", "thought_signature"):
                name = field_of(first, "functionCall", "function_call").get("name", "")
                position = contents[i]["parts"].index(first) + 1
                raise WireRequestError(_MISSING_SIGNATURE.format(name=name, position=position))


def _check_parts(parts: Any, where: str, role: str) -> None:
    if not isinstance(parts, list) or not parts:
        raise invalid(f"{where}.parts", "contents.parts must not be empty.")
    for j, part in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if not isinstance(part, dict):
            raise WireRequestError(f"Invalid value at '{at}': expected an object")
        data = [k for k in part if k in _DATA_FIELDS]
        for key in part:
            if key not in _DATA_FIELDS and key not in _PART_MODIFIERS:
                raise unknown_field(key, at)
        if len(data) != 1:
            raise invalid(f"{at}.data", "required oneof field 'data' must have one initialized field")
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
                raise invalid(f"{at}.function_call", "function calls are only allowed in model turns")
            _check_call(value, at)
        elif kind == "functionResponse":
            if role != "user":
                raise invalid(f"{at}.function_response", "function responses are only allowed in user turns")
            _check_response(value, at)
        signature = field_of(part, "thoughtSignature", "thought_signature")
        if signature is not None and not isinstance(signature, str):
            raise WireRequestError(f"Invalid value at '{at}.thought_signature': expected a string")


def _check_inline(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise WireRequestError(f"Invalid value at '{at}.inline_data': expected an object")
    for key in value:
        if key not in ("mimeType", "mime_type", "data"):
            raise unknown_field(key, f"{at}.inline_data")
    mime = field_of(value, "mimeType", "mime_type")
    data = value.get("data")
    if not isinstance(mime, str) or not mime:
        raise invalid(f"{at}.inline_data.mime_type", "required field is not specified")
    if not isinstance(data, str) or not data:
        raise invalid(f"{at}.inline_data.data", "required field is not specified")
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
            raise unknown_field(key, f"{at}.function_call")
    name = value.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.match(name):
        raise invalid(f"{at}.function_call.name", "Invalid function name.")
    if "args" in value and not isinstance(value["args"], dict):
        raise WireRequestError(
            f"Invalid value at '{at}.function_call.args' (type.googleapis.com/google.protobuf.Struct)"
        )


def _check_response(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise WireRequestError(f"Invalid value at '{at}.function_response': expected an object")
    for key in value:
        if key not in ("name", "response", "id", "parts", "willContinue", "scheduling"):
            raise unknown_field(key, f"{at}.function_response")
    name = value.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.match(name):
        raise invalid(f"{at}.function_response.name", "Invalid function name.")
    if not isinstance(value.get("response"), dict):
        raise invalid(f"{at}.function_response.response", "required field is not specified")
