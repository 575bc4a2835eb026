"""``input`` items → canonical chat messages (spec/surfaces.md §1).

* a string is one user message;
* ``message`` items (``type`` optional) keep their role, ``developer`` becoming ``system``; text parts
  (``input_text``, ``output_text``, ``text``, ``summary_text``, ``refusal``) become text, image parts
  (``input_image``, ``computer_screenshot``, ``image_url``, ``image``) ``image_url`` parts with their
  ``detail``; all-text content becomes one string;
* an assistant message and the ``function_call`` items after it fold into ONE assistant message with
  ``tool_calls`` (a run of bare calls makes one assistant message; ``call_id`` is the tool-call id);
  an empty assistant message without calls is dropped;
* ``function_call_output`` becomes a ``tool`` message (string; parts → joined text; object → JSON);
* reasoning, hosted-tool, ``item_reference`` and any other unknown items are skipped; computer-use
  items are refused (422), there being no computer-use model behind the gateway.

System messages are *not* hoisted here: the caller hoists them over the whole chained conversation.
Everything raises :class:`ClientError` on malformed input, never anything else.
"""

from __future__ import annotations

from typing import Any

import orjson

from freellm.errors import ClientError

__all__ = ["bad_request", "input_messages"]

_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_IMAGE_PARTS = frozenset({"input_image", "computer_screenshot", "image_url", "image"})
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_COMPUTER_ITEMS = frozenset({"computer_call", "computer_call_output"})

Message = dict[str, Any]


def bad_request(param: str, message: str) -> ClientError:
    """A 400 naming the offending parameter the way OpenAI does (``input[2].content``)."""
    return ClientError(400, f"Invalid request: {param}: {message}", type="invalid_request_error", param=param)


def input_messages(value: Any) -> list[Message]:
    """Map the ``input`` parameter to canonical chat messages, in order."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise bad_request("input", "Input should be a string or an array of input items")
    out: list[Message] = []
    calls_join: Message | None = None
    """The assistant message following ``function_call`` items join (None: the next call opens one)."""
    for i, item in enumerate(value):
        path = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request(path, "Input should be an object")
        kind = item.get("type")
        if kind is None:
            if "role" not in item:
                raise bad_request(f"{path}.type", "Missing required parameter (an item needs a type or a role)")
            kind = "message"
        if not isinstance(kind, str):
            raise bad_request(f"{path}.type", "Input should be a string")
        if kind == "message":
            message = _message(item, path)
            out.append(message)
            calls_join = message if message["role"] == "assistant" else None
        elif kind == "function_call":
            call = _function_call(item, path)
            if calls_join is None:
                calls_join = {"role": "assistant", "content": None}
                out.append(calls_join)
            calls_join.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            out.append(_function_call_output(item, path))
            calls_join = None
        elif kind in _COMPUTER_ITEMS:
            raise ClientError(
                422,
                "Computer use is not available: no model behind this gateway supports it.",
                code="no_computer_use_model",
                param=f"{path}.type",
            )
        # Anything else (reasoning, web/file search calls, item_reference, …) carries nothing a chat
        # model can use; skipping it does not end an assistant turn that function calls still join.
    return [m for m in out if not _empty_assistant(m)]


def _empty_assistant(message: Message) -> bool:
    return message["role"] == "assistant" and not message.get("content") and not message.get("tool_calls")


def _message(item: dict[str, Any], path: str) -> Message:
    role = item.get("role")
    if not isinstance(role, str):
        raise bad_request(f"{path}.role", "Missing required parameter" if role is None else "Input should be a string")
    canonical = _ROLES.get(role)
    if canonical is None:
        raise bad_request(f"{path}.role", "Input should be 'user', 'assistant', 'system' or 'developer'")
    content = _content(item.get("content"), f"{path}.content", images=canonical == "user")
    if canonical == "assistant":
        text = content if isinstance(content, str) else _joined_text(content)
        return {"role": "assistant", "content": text or None}
    return {"role": canonical, "content": content}


def _content(value: Any, path: str, *, images: bool) -> str | list[dict[str, Any]]:
    """A message's content: a string, or chat parts when it holds an image (text otherwise joined)."""
    if isinstance(value, str):
        return value
    if value is None:
        raise bad_request(path, "Missing required parameter")
    if not isinstance(value, list):
        raise bad_request(path, "Input should be a string or an array of content parts")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(value):
        ppath = f"{path}[{j}]"
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        if not isinstance(part, dict):
            raise bad_request(ppath, "Input should be an object")
        kind = part.get("type")
        if kind is not None and not isinstance(kind, str):  # checked first: a list or object is unhashable
            raise bad_request(f"{ppath}.type", "Input should be a string")
        if kind in _TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{ppath}.text", "Input should be a string")
            parts.append({"type": "text", "text": text})
        elif kind == "refusal":
            refusal = part.get("refusal")
            if not isinstance(refusal, str):
                raise bad_request(f"{ppath}.refusal", "Input should be a string")
            parts.append({"type": "text", "text": refusal})
        elif kind in _IMAGE_PARTS:
            if images:
                parts.append(_image(part, ppath))
        elif kind == "input_file":
            raise ClientError(
                422,
                "File inputs (input_file) are not supported by this gateway; send the text instead.",
                code="unsupported_file_input",
                param=ppath,
            )
        elif kind is None:
            raise bad_request(f"{ppath}.type", "Input should be a string")
        # other part types (audio…) are skipped
    if all(p["type"] == "text" for p in parts):
        return _joined_text(parts)
    return parts


def _joined_text(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts if p.get("type") == "text")


def _image(part: dict[str, Any], path: str) -> dict[str, Any]:
    url: Any = part.get("image_url")
    detail = part.get("detail")
    if isinstance(url, dict):  # the chat shape {"image_url": {"url", "detail"}}
        detail = url.get("detail", detail)
        url = url.get("url")
    if url is None:
        url = part.get("url")
    if not isinstance(url, str) or not url:
        if part.get("file_id") is not None:
            raise ClientError(
                422,
                "Images by file_id are not supported; send the image as a URL or a data: URL.",
                code="unsupported_image_input",
                param=f"{path}.file_id",
            )
        raise bad_request(f"{path}.image_url", "Missing required parameter (an image URL or data: URL)")
    image: dict[str, Any] = {"url": url}
    if isinstance(detail, str) and detail:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _function_call(item: dict[str, Any], path: str) -> dict[str, Any]:
    call_id = item.get("call_id")
    if call_id is None:
        call_id = item.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{path}.call_id", "Missing required parameter")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{path}.name", "Missing required parameter" if name is None else "Input should be a string")
    arguments = item.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        if not isinstance(arguments, dict):
            raise bad_request(f"{path}.arguments", "Input should be a string")
        arguments = _json(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _function_call_output(item: dict[str, Any], path: str) -> Message:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{path}.call_id", "Missing required parameter")
    output = item.get("output")
    if output is None:
        text = ""
    elif isinstance(output, str):
        text = output
    elif isinstance(output, list):
        text = "".join(
            p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else p if isinstance(p, str) else ""
            for p in output
        )
    else:
        text = _json(output)
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        raise bad_request("input", "Input is nested too deeply or is not valid JSON") from None
