"""Ollama requests → the canonical chat request (spec/surfaces.md §5).

Pure functions: what the engine runs for an ``/api/chat`` or ``/api/generate`` body. Ollama's shapes
differ from OpenAI's in a few places that matter: tool-call arguments are objects (JSON strings
upstream), tool results name their function rather than a call id, images are bare base64, the output
cap is ``options.num_predict`` (negative = until done) and ``format`` is ``"json"`` or a JSON schema.
"""

from __future__ import annotations

import base64
import binascii
from collections import deque
from typing import Any

import orjson

from freellm.core.request import ChatRequest, parse_chat_request
from freellm.errors import ClientError
from freellm.surfaces.ollama.wire import ChatBody, GenerateBody, OllamaMessage, OllamaOptions

__all__ = [
    "GENERATE_SUFFIX_INSTRUCTION",
    "chat_request",
    "generate_request",
    "image_data_url",
    "is_load_request",
    "model_name",
    "requested_route",
]

GENERATE_SUFFIX_INSTRUCTION = (
    "Write the text that goes between the prompt and the suffix below; answer with only that text.\n\nSuffix:\n"
)
"""How ``/api/generate``'s ``suffix`` (fill-in-the-middle) reaches a chat model."""

_LATEST = ":latest"
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"RIFF", "image/webp"),
)


def model_name(raw: str) -> str:
    """The name the client used, as Ollama echoes it: empty → ``auto``."""
    name = raw.strip()
    return name or "auto"


def requested_route(raw: str) -> str:
    """The model to route: ``:latest`` stripped (an Ollama client's default tag), empty → ``auto``."""
    name = model_name(raw)
    return name[: -len(_LATEST)] if name.endswith(_LATEST) and len(name) > len(_LATEST) else name


def is_load_request(body: ChatBody | GenerateBody) -> bool:
    """An empty chat or prompt: Ollama's "load the model" call, answered without an upstream call."""
    if isinstance(body, ChatBody):
        return not body.messages
    return not body.prompt and not body.suffix


def image_data_url(b64: str) -> str:
    """A base64 image as a data URL, its type read from its first bytes (PNG when unknown)."""
    text = b64.strip()
    if text.startswith("data:"):
        return text
    try:
        head = base64.b64decode(text[:24] + "=" * (-len(text[:24]) % 4), validate=False)
    except (binascii.Error, ValueError):
        raise ClientError(400, "invalid request: images: not base64") from None
    media = next((m for magic, m in _MAGIC if head.startswith(magic)), "image/png")
    return f"data:{media};base64,{text}"


def _options(options: OllamaOptions | None, default_max_tokens: int) -> dict[str, Any]:
    out: dict[str, Any] = {"max_tokens": default_max_tokens}
    if options is None:
        return out
    if options.num_predict is not None and options.num_predict > 0:
        out["max_tokens"] = options.num_predict
    for name in ("temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty"):
        value = getattr(options, name)
        if value is not None:
            out[name] = value
    if options.repeat_penalty is not None:
        out["repetition_penalty"] = options.repeat_penalty
    if options.stop is not None:
        stop = [options.stop] if isinstance(options.stop, str) else options.stop
        if stop:
            out["stop"] = stop[:4]
    return out


def _format(fmt: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if fmt is None:
        return None
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    raise ClientError(400, 'invalid request: format: Input should be "json" or a JSON schema object')


def _think(think: bool | str | None) -> dict[str, Any]:
    return {"reasoning_effort": think} if isinstance(think, str) else {}


def _content(text: str, images: list[str] | None) -> str | list[dict[str, Any]]:
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    parts += [{"type": "image_url", "image_url": {"url": image_data_url(img)}} for img in images]
    return parts


def _arguments(value: dict[str, Any] | str) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _messages(messages: list[OllamaMessage]) -> list[dict[str, Any]]:
    """OpenAI messages; each tool result is paired with its call: by ``tool_call_id``, else the oldest
    pending call of the function it names (``tool_name``), else the oldest pending call."""
    out: list[dict[str, Any]] = []
    pending: deque[tuple[str, str]] = deque()  # (call id, function name), oldest first
    counter = 0
    for msg in messages:
        text = msg.content or ""
        if msg.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if msg.tool_calls:
                calls = []
                for call in msg.tool_calls:
                    counter += 1
                    call_id = call.id or f"call_{counter}"
                    pending.append((call_id, call.function.name))
                    calls.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.function.name, "arguments": _arguments(call.function.arguments)},
                        }
                    )
                entry["tool_calls"] = calls
            elif not text:
                entry["content"] = ""
            out.append(entry)
        elif msg.role == "tool":
            answered = _pair(pending, msg.tool_call_id, msg.tool_name)
            if answered is None:
                # A result with no call before it: keep the information as user text, never drop it.
                label = f"Result of tool {msg.tool_name}" if msg.tool_name else "Tool result"
                out.append({"role": "user", "content": f"{label}:\n{text}"})
            else:
                out.append({"role": "tool", "tool_call_id": answered, "content": text})
        else:
            out.append({"role": msg.role, "content": _content(text, msg.images if msg.role == "user" else None)})
    return out


def _pair(pending: deque[tuple[str, str]], call_id: str | None, name: str | None) -> str | None:
    """The pending call a tool result answers (see :func:`_messages`), removed from ``pending``."""
    for matches in (lambda pid, _: pid == call_id, lambda _, pname: name is not None and pname == name):
        for index, (pid, pname) in enumerate(pending):
            if matches(pid, pname):
                del pending[index]
                return pid
    return pending.popleft()[0] if pending else None


def _tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    out = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ClientError(400, "invalid request: tools: each tool needs a function with a name")
        out.append({"type": "function", "function": fn})
    return out


def _validated(doc: dict[str, Any]) -> ChatRequest:
    try:
        return parse_chat_request(doc)
    except ClientError as exc:  # re-worded for this wire: Ollama's errors are one string
        raise ClientError(400, exc.message.replace("Invalid request", "invalid request", 1)) from None


def chat_request(body: ChatBody, *, default_max_tokens: int) -> ChatRequest:
    """The canonical request for a (non-empty) ``/api/chat`` body."""
    doc: dict[str, Any] = {
        "model": requested_route(body.model),
        "messages": _messages(body.messages),
        "stream": body.stream,
        **_options(body.options, default_max_tokens),
        **_think(body.think),
    }
    if body.stream:
        doc["stream_options"] = {"include_usage": True}  # the final line's eval counts
    tools = _tools(body.tools)
    if tools:
        doc["tools"] = tools
    fmt = _format(body.format)
    if fmt is not None:
        doc["response_format"] = fmt
    return _validated(doc)


def generate_request(body: GenerateBody, *, default_max_tokens: int) -> ChatRequest:
    """The canonical request for a (non-empty) ``/api/generate`` body: ``system`` as the system message,
    the prompt (and images) as the user message, a ``suffix`` after an instruction to fill the gap."""
    text = body.prompt
    if body.suffix:
        text = f"{text}\n\n{GENERATE_SUFFIX_INSTRUCTION}{body.suffix}"
    messages: list[dict[str, Any]] = []
    if body.system:
        messages.append({"role": "system", "content": body.system})
    messages.append({"role": "user", "content": _content(text, body.images)})
    doc: dict[str, Any] = {
        "model": requested_route(body.model),
        "messages": messages,
        "stream": body.stream,
        **_options(body.options, default_max_tokens),
        **_think(body.think),
    }
    if body.stream:
        doc["stream_options"] = {"include_usage": True}
    fmt = _format(body.format)
    if fmt is not None:
        doc["response_format"] = fmt
    return _validated(doc)
