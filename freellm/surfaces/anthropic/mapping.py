"""Anthropic Messages request → canonical chat request (spec/surfaces.md §2 "Request → chat form").

* ``system`` (string or text blocks) and every ``role: "system"`` message in ``messages`` are hoisted,
  in order, into one leading system message (many free upstreams reject a system message anywhere but
  first): one string (blocks joined with ``\\n``, sources with a blank line).
* A user turn becomes its ``tool`` messages first (one per ``tool_result``, in order), then one user
  message with the rest: text only → one string (blocks joined with ``\\n``); with images → parts in the
  client's order. Text documents are inlined as fenced text; PDF/URL/file documents are refused (400)
  before routing, with at most three distinct reasons and no payload echo.
* An assistant turn becomes one message: text (or null) plus ``tool_calls`` from its ``tool_use``
  blocks. Its **signed** thinking is kept as sent ("reasoning the client sent itself"): one ``thinking``
  block with a non-empty ``signature`` → ``reasoning_content`` + ``reasoning_signature``; several
  thinking blocks, or any ``redacted_thinking`` block → ``thinking_blocks`` (the blocks verbatim, in
  order, for an Anthropic upstream; an extra field like the pair) plus ``reasoning_content`` (the
  thinking texts joined with newlines, for OpenAI-wire upstreams) and no signature (one signature
  cannot stand for several blocks). Thinking blocks without a signature (what this gateway renders for
  reasoning that came unsigned) and unknown blocks are dropped.
* **Prompt-caching markers** (``cache_control``) ride on the canonical content part of the block they
  were set on. A message (the hoisted system message, a user or assistant message, a tool result) in
  which some block carries one gets a list of content parts instead of the joined string, one text part
  per block (``{"type": "text", "text", "cache_control"}``), so block boundaries and markers survive; a
  marker on a ``tool_result`` block goes on its last part, one on a ``tool_use`` block on its tool call.
  Without any marker the output is exactly the strings above. The Anthropic upstream turns the parts
  back into marked blocks; OpenAI-compatible upstreams other than OpenRouter get the strings back
  (:mod:`freellm.providers.openai_compat`).
* ``tools``: client tools (no ``type`` or ``custom``) become functions with ``input_schema`` as
  parameters (a ``cache_control`` is kept on the tool); server tools (``web_search_20250305``, computer
  use, bash…) are dropped. ``tool_choice`` auto/none/any→required/tool→named;
  ``disable_parallel_tool_use`` → ``parallel_tool_calls: false``.
* ``stop_sequences`` → ``stop`` (forwarded, unlike the reference), ``max_tokens`` (absent or ≤ 0 →
  1024), ``temperature``, ``top_p``, ``top_k``; ``thinking`` of any type → ``reasoning_effort`` (else
  ``output_config.effort``); ``output_config.format`` (JSON schema) → ``response_format``.
* The model goes through :func:`resolve_model`: Claude names never 404.
"""

from __future__ import annotations

from typing import Any

import orjson

from freellm.core.request import ChatRequest, parse_chat_request
from freellm.core.validation import invalid_request
from freellm.routing.catalog import Catalog
from freellm.routing.family_map import DEFAULT_FAMILY, longest_family, resolve_mapped
from freellm.surfaces.anthropic.documents import document_reason, document_text
from freellm.surfaces.anthropic.wire import (
    Block,
    DocumentBlock,
    ImageBlock,
    MessagesRequest,
    OtherBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "classify_family",
    "resolve_model",
    "thinking_effort",
    "to_chat_body",
    "to_chat_request",
]

DEFAULT_MAX_TOKENS = 1024
_MAX_STOP = 4
_DEFAULT_NAMES = frozenset({"", "auto", "default", "freellmapi-auto", "freellm-auto"})
_CLIENT_TOOL_TYPES = frozenset({"custom"})
_MAX_DOC_REASONS = 3
_OUTPUT_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


# ---- model ------------------------------------------------------------------------------------------


def classify_family(name: str, model_map: dict[str, str]) -> str:
    """The ``model_map`` family a requested name belongs to (``default`` when none).

    The longest family key contained in the lower-cased name wins (``opus``, ``sonnet``, ``haiku`` or
    any key the operator added); ``opusplan`` is Claude Code's plan-mode alias and maps to ``default``
    unless the map names it.
    """
    lower = name.strip().lower()
    if lower.startswith("opusplan") and not any(k.lower() == "opusplan" for k in model_map):
        return DEFAULT_FAMILY
    return longest_family(name, model_map, default_names=_DEFAULT_NAMES)


def resolve_model(requested: str | None, catalog: Catalog, model_map: dict[str, str]) -> str:
    """The model to route to for a client's model string. Never raises: unknown names become ``auto``.

    A name (after stripping a ``claude/`` prefix) that is a configured route, group or ``auto`` is used
    as is; anything else is classified into a family and looked up in ``model_map`` (whose target falls
    back to ``auto`` when it is not routable either).
    """
    name = (requested or "").strip()
    if name.lower().startswith("claude/"):
        name = name[len("claude/") :].strip()
    return resolve_mapped(name, classify_family(name, model_map), catalog, model_map)


# ---- thinking ---------------------------------------------------------------------------------------


def thinking_effort(kind: str, budget: int | None) -> str | None:
    """``thinking`` → ``reasoning_effort``: disabled → none; adaptive/auto without budget → unset;
    no budget → medium; budget < 4096 low, < 16384 medium, else high."""
    k = kind.strip().lower()
    if k in ("disabled", "off", "none"):
        return "none"
    if budget is None or budget <= 0:
        return None if k in ("adaptive", "auto") else "medium"
    if budget < 4096:
        return "low"
    if budget < 16384:
        return "medium"
    return "high"


# ---- messages ---------------------------------------------------------------------------------------


class _Translator:
    """Walks the validated request once; collects document refusals to report them together."""

    def __init__(self) -> None:
        self.doc_issues: dict[str, str] = {}  # reason -> first path

    def refuse_document(self, path: str, block: DocumentBlock) -> None:
        reason = document_reason(block)
        self.doc_issues.setdefault(reason, path)

    def image_part(self, path: str, block: ImageBlock) -> dict[str, Any]:
        source = block.source
        kind = source.get("type")
        if kind == "base64":
            media, data = source.get("media_type"), source.get("data")
            if not isinstance(media, str) or not isinstance(data, str) or not data:
                raise invalid_request([f"{path}.source: a base64 image needs string `media_type` and `data`"], path)
            return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
        if kind == "url":
            url = source.get("url")
            if not isinstance(url, str) or not url:
                raise invalid_request([f"{path}.source.url: Input should be a non-empty string"], path)
            return {"type": "image_url", "image_url": {"url": url}}
        if kind == "file":
            raise invalid_request(
                [f"{path}.source: images from the Files API (source type `file`) are not supported"], path
            )
        raise invalid_request([f"{path}.source.type: Input should be 'base64' or 'url'"], path)

    def blocks_parts(self, path: str, blocks: list[Any]) -> list[dict[str, Any]]:
        """Text parts (with their ``cache_control``) of text blocks and inlined text documents, in order;
        other blocks dropped. ``"\\n".join`` of their texts is the blocks' joined text."""
        out: list[dict[str, Any]] = []
        for i, b in enumerate(blocks):
            if isinstance(b, TextBlock):
                if b.text:
                    out.append(_text_part(b.text, b))
            elif isinstance(b, DocumentBlock):
                text = document_text(b)
                if text is None:
                    self.refuse_document(f"{path}.{i}", b)
                else:
                    out.append(_text_part(text, b))
        return out

    def tool_result(self, path: str, block: ToolResultBlock) -> dict[str, Any]:
        content = block.content
        parts: list[dict[str, Any]] | None = None
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        elif isinstance(content, list):
            parts = self.blocks_parts(f"{path}.content", content)
            text = _joined(parts)
        else:
            text = orjson.dumps(content).decode()
        error_prefix = bool(block.is_error) and not text.lower().startswith("error")
        marker = _cache_control(block)
        if marker is not None or (parts is not None and _has_marker(parts)):
            marked = _marked_result(text if parts is None else parts, error_prefix, marker)
            if marked:
                return {"role": "tool", "tool_call_id": block.tool_use_id, "content": marked}
        if error_prefix:
            text = f"Error: {text}" if text else "Error"
        return {"role": "tool", "tool_call_id": block.tool_use_id, "content": text}

    def user_turn(self, path: str, content: str | list[Block]) -> list[dict[str, Any]]:
        if isinstance(content, str):
            return [{"role": "user", "content": content}]
        tools: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        has_image = False
        for i, b in enumerate(content):
            bpath = f"{path}.{i}"
            if isinstance(b, ToolResultBlock):
                tools.append(self.tool_result(bpath, b))
            elif isinstance(b, TextBlock):
                if b.text:
                    parts.append(_text_part(b.text, b))
            elif isinstance(b, ImageBlock):
                parts.append(_with_marker(self.image_part(bpath, b), b))
                has_image = True
            elif isinstance(b, DocumentBlock):
                text = document_text(b)
                if text is None:
                    self.refuse_document(bpath, b)
                else:
                    parts.append(_text_part(text, b))
        out = tools
        if has_image or _has_marker(parts):
            out.append({"role": "user", "content": parts})
        elif parts:
            out.append({"role": "user", "content": _joined(parts)})
        return out

    def assistant_turn(self, content: str | list[Block]) -> dict[str, Any] | None:
        if isinstance(content, str):
            return {"role": "assistant", "content": content}
        texts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        thinking: list[dict[str, str]] = []
        for b in content:
            if isinstance(b, OtherBlock):
                block = _signed_thinking(b)
                if block is not None:
                    thinking.append(block)
            elif isinstance(b, TextBlock):
                if b.text:
                    texts.append(_text_part(b.text, b))
            elif isinstance(b, ToolUseBlock):
                args = b.input if b.input is not None else {}
                call: dict[str, Any] = {
                    "id": b.id,
                    "type": "function",
                    "function": {"name": b.name, "arguments": orjson.dumps(args).decode()},
                }
                extra = b.model_extra or {}
                for key in ("thought_signature", "thoughtSignature"):
                    if isinstance(extra.get(key), str):
                        call["thought_signature"] = extra[key]
                        break
                calls.append(_with_marker(call, b))
        if not texts and not calls:
            return None
        body: str | list[dict[str, Any]] | None = None
        if texts:
            body = texts if _has_marker(texts) else _joined(texts)
        msg: dict[str, Any] = {"role": "assistant", "content": body}
        if calls:
            msg["tool_calls"] = calls
        if len(thinking) == 1 and thinking[0]["type"] == "thinking":
            msg["reasoning_content"] = thinking[0]["thinking"]
            msg["reasoning_signature"] = thinking[0]["signature"]
        elif thinking:
            msg["thinking_blocks"] = thinking
            texts_of = [t["thinking"] for t in thinking if t["type"] == "thinking" and t["thinking"]]
            if texts_of:
                msg["reasoning_content"] = "\n".join(texts_of)
        return msg


def _signed_thinking(block: OtherBlock) -> dict[str, str] | None:
    """A signed ``thinking`` block or a ``redacted_thinking`` block, as its canonical copy; None for
    anything else (unsigned thinking included)."""
    extra = block.model_extra or {}
    if block.type == "thinking":
        text, signature = extra.get("thinking"), extra.get("signature")
        if isinstance(text, str) and isinstance(signature, str) and signature:
            return {"type": "thinking", "thinking": text, "signature": signature}
    elif block.type == "redacted_thinking":
        data = extra.get("data")
        if isinstance(data, str) and data:
            return {"type": "redacted_thinking", "data": data}
    return None


def _cache_control(block: Any) -> dict[str, Any] | None:
    """The block's ``cache_control`` marker (an object), if it has one."""
    extra = block.model_extra
    marker = extra.get("cache_control") if extra else None
    return marker if isinstance(marker, dict) else None


def _with_marker(target: dict[str, Any], block: Any) -> dict[str, Any]:
    """``target`` with the ``cache_control`` of ``block`` set on it (when it has one)."""
    marker = _cache_control(block)
    if marker is not None:
        target["cache_control"] = marker
    return target


def _text_part(text: str, block: Any) -> dict[str, Any]:
    return _with_marker({"type": "text", "text": text}, block)


def _has_marker(parts: list[dict[str, Any]]) -> bool:
    return any("cache_control" in p for p in parts)


def _joined(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts)


def _marked_result(
    content: str | list[dict[str, Any]], error_prefix: bool, marker: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """A marked tool result's text parts: the block's own marker on the last part (unless that part has
    one), ``Error: `` before the first when ``is_error``; empty when there is no text to mark."""
    parts: list[dict[str, Any]]
    if isinstance(content, str):
        parts = [{"type": "text", "text": content}] if content else []
    else:
        parts = [dict(p) for p in content if p["text"]]
    if error_prefix:
        if parts:
            parts[0]["text"] = f"Error: {parts[0]['text']}"
        else:
            parts = [{"type": "text", "text": "Error"}]
    if marker is not None and parts and "cache_control" not in parts[-1]:
        parts[-1]["cache_control"] = marker
    return parts if _has_marker(parts) else []


def _system_parts(content: str | list[Block], translator: _Translator, path: str) -> list[dict[str, Any]]:
    """One system source as text parts (a string is one unmarked part); empty when it has no text."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    parts = translator.blocks_parts(path, content)
    return parts if _joined(parts) else []


def _system_content(sources: list[list[dict[str, Any]]]) -> str | list[dict[str, Any]]:
    """The hoisted system message's content: each source's blocks joined with a newline and sources with
    a blank line, or, when some block carries a ``cache_control``, every non-empty block as a part."""
    if any(_has_marker(parts) for parts in sources):
        return [p for parts in sources for p in parts if p["text"]]
    return "\n\n".join(_joined(parts) for parts in sources)


def _tools(req: MessagesRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in req.tools or ():
        if tool.type is not None and tool.type not in _CLIENT_TOOL_TYPES:
            continue  # a server tool (web search, computer use, bash…): the upstream cannot run it
        fn: dict[str, Any] = {
            "name": tool.name,
            "parameters": tool.input_schema
            if tool.input_schema is not None
            else {"type": "object", "properties": {}},
        }
        if tool.description:
            fn["description"] = tool.description
        out.append(_with_marker({"type": "function", "function": fn}, tool))
    return out


def _tool_choice(req: MessagesRequest, names: set[str]) -> str | dict[str, Any] | None:
    choice = req.tool_choice
    if choice is None:
        return None
    if choice.type == "tool":
        if choice.name and choice.name in names:
            return {"type": "function", "function": {"name": choice.name}}
        return "required" if names else None
    return {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def to_chat_body(req: MessagesRequest, model: str) -> dict[str, Any]:
    """The canonical chat body for a validated Anthropic request (raises ClientError for documents)."""
    tr = _Translator()
    system: list[list[dict[str, Any]]] = []  # the text parts of each system source, in order
    if req.system is not None:
        parts = _system_parts(req.system, tr, "system")
        if parts:
            system.append(parts)
    messages: list[dict[str, Any]] = []
    for i, m in enumerate(req.messages):
        path = f"messages.{i}.content"
        if m.role == "system":
            parts = _system_parts(m.content, tr, path)
            if parts:
                system.append(parts)
        elif m.role == "user":
            messages.extend(tr.user_turn(path, m.content))
        else:
            msg = tr.assistant_turn(m.content)
            if msg is not None:
                messages.append(msg)
    if tr.doc_issues:
        items = list(tr.doc_issues.items())[:_MAX_DOC_REASONS]
        raise invalid_request([f"{where}: {reason}" for reason, where in items], items[0][1])
    if not messages:
        raise invalid_request(["messages: at least one user or assistant message must have content"], "messages")
    if system:
        messages.insert(0, {"role": "system", "content": _system_content(system)})

    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": bool(req.stream),
        "max_tokens": req.max_tokens
        if req.max_tokens is not None and req.max_tokens > 0
        else DEFAULT_MAX_TOKENS,
    }
    stops = [s for s in req.stop_sequences or () if s]
    if stops:
        body["stop"] = stops[:_MAX_STOP]
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.top_k is not None and req.top_k >= 1:
        body["top_k"] = req.top_k
    tools = _tools(req)
    if tools:
        body["tools"] = tools
        choice = _tool_choice(req, {t["function"]["name"] for t in tools})
        if choice is not None:
            body["tool_choice"] = choice
        if req.tool_choice is not None and req.tool_choice.disable_parallel_tool_use:
            body["parallel_tool_calls"] = False
    effort = (
        thinking_effort(req.thinking.type, req.thinking.budget_tokens) if req.thinking is not None else None
    )
    config = req.output_config
    if effort is None and config is not None and config.effort is not None:
        effort = _OUTPUT_EFFORTS.get(config.effort.strip().lower())
    if effort is not None:
        body["reasoning_effort"] = effort
    fmt = config.format if config is not None else None
    if fmt is not None and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": fmt["schema"]},
        }
    return body


def to_chat_request(req: MessagesRequest, model: str) -> ChatRequest:
    """:func:`to_chat_body` validated into the canonical :class:`ChatRequest`."""
    return parse_chat_request(to_chat_body(req, model))
