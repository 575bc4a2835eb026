"""OpenAI-compatible upstreams (Groq, Cerebras, OpenRouter, vLLM, llama.cpp, Ollama, …).

The canonical form *is* this wire, so the request body goes out as built and each ``data:`` frame is
parsed once and handed on. All I/O failures are mapped to :class:`UpstreamError` at the boundary (the
shared plumbing in :mod:`freellm.providers.http`): the fallback loop only ever sees facts (status,
transport, timeout, retry hint), never aiohttp types.

Prompt-caching markers (``cache_control``, Anthropic's) are forwarded only to OpenRouter, which turns
them into its providers' own caching; every other OpenAI-compatible server gets the request without
them (:func:`without_cache_control`), since strict ones (Groq, Mistral…) refuse unknown fields and Groq
refuses a system message whose content is not a string.

Reasoning the canonical history carries is forwarded the OpenAI way: an assistant message's
``reasoning_content`` goes out as it is (DeepSeek, Kimi and other thinking models want it back on tool
turns), while the fields only the Anthropic and Gemini wires can use — ``reasoning_signature`` and an
Anthropic client's ``thinking_blocks`` — are never sent to an OpenAI-wire upstream
(:func:`without_signatures`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from freellm.config import ProviderConfig
from freellm.core.chunks import Chunk
from freellm.core.embeddings import EmbeddingAnswer, EmbeddingRequest
from freellm.errors import UpstreamError
from freellm.providers.base import Timeouts
from freellm.providers.embedding_wire import openai_embedding_answer, openai_embedding_body
from freellm.providers.http import (
    CompletionStream,
    SSEStream,
    error_message_of,
    failed_generation_stream,
    post_json,
    probe_status,
    read_body,
    transport_error,
)

__all__ = [
    "CompletionStream",
    "OpenAICompatProvider",
    "OpenAIStream",
    "accepts_cache_control",
    "completion_to_chunks",
    "error_message_of",
    "transport_error",
    "without_cache_control",
    "without_signatures",
]

_CACHE_CONTROL = "cache_control"
_CACHE_CONTROL_HOSTS = ("openrouter.ai",)
"""Hosts (and their subdomains) of OpenAI-compatible APIs that take ``cache_control`` markers."""


def accepts_cache_control(base_url: str) -> bool:
    """Whether an OpenAI-compatible API at ``base_url`` takes ``cache_control`` markers (OpenRouter)."""
    host = (urlsplit(base_url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in _CACHE_CONTROL_HOSTS)


def without_cache_control(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without ``cache_control`` markers: ``body`` itself when it has none, else a copy.

    A marker is removed wherever it sits (a message, a content part, a tool call, a tool). A content
    list made only of text parts of which one was marked becomes the string of its texts joined with
    newlines: that is how the Anthropic surface sends unmarked blocks, and Groq refuses a system message
    whose content is a list. The caller's nested values are never changed.
    """
    messages = body.get("messages")
    new_messages: list[Any] | None = None
    if isinstance(messages, list):
        for i, msg in enumerate(messages):
            new = _message_without_markers(msg)
            if new is not msg:
                if new_messages is None:
                    new_messages = list(messages)
                new_messages[i] = new
    tools = body.get("tools")
    new_tools: list[Any] | None = None
    if isinstance(tools, list) and any(_marked(t) for t in tools):
        new_tools = [_unmarked(t) for t in tools]
    if new_messages is None and new_tools is None:
        return body
    out = dict(body)
    if new_messages is not None:
        out["messages"] = new_messages
    if new_tools is not None:
        out["tools"] = new_tools
    return out


_SIGNED_FIELDS = ("reasoning_signature", "thinking_blocks")
"""Assistant-message fields that only Anthropic/Gemini upstreams can use (opaque signed reasoning)."""


def without_signatures(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without ``reasoning_signature`` / ``thinking_blocks`` on its messages: ``body`` itself
    when none has them, else a copy (the caller's messages are never changed). ``reasoning_content``
    stays."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    new_messages: list[Any] | None = None
    for i, msg in enumerate(messages):
        if isinstance(msg, Mapping) and ("reasoning_signature" in msg or "thinking_blocks" in msg):
            if new_messages is None:
                new_messages = list(messages)
            new_messages[i] = {k: v for k, v in msg.items() if k not in _SIGNED_FIELDS}
    if new_messages is None:
        return body
    return {**body, "messages": new_messages}


def _marked(value: Any) -> bool:
    return isinstance(value, Mapping) and _CACHE_CONTROL in value


def _unmarked(value: Any) -> Any:
    if not _marked(value):
        return value
    return {k: v for k, v in value.items() if k != _CACHE_CONTROL}


def _message_without_markers(msg: Any) -> Any:
    if not isinstance(msg, Mapping):
        return msg
    content = msg.get("content")
    calls = msg.get("tool_calls")
    marked_parts = isinstance(content, list) and any(_marked(p) for p in content)
    marked_calls = isinstance(calls, list) and any(_marked(c) for c in calls)
    if not (marked_parts or marked_calls or _CACHE_CONTROL in msg):
        return msg
    out = {k: v for k, v in msg.items() if k != _CACHE_CONTROL}
    if marked_parts:
        assert isinstance(content, list)
        if all(_is_text_part(p) for p in content):
            out["content"] = "\n".join(p["text"] for p in content)
        else:
            out["content"] = [_unmarked(p) for p in content]
    if marked_calls:
        assert isinstance(calls, list)
        out["tool_calls"] = [_unmarked(c) for c in calls]
    return out


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)


class OpenAICompatProvider:
    """One configured OpenAI-wire provider, sharing the app's pooled HTTP session."""

    def __init__(self, config: ProviderConfig, session: aiohttp.ClientSession) -> None:
        self.config = config
        self._session = session
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._extra_headers = dict(config.headers)
        self._keep_cache_control = accepts_cache_control(config.base_url)
        self._models_url = config.base_url.rstrip("/") + "/models"
        self._embeddings_url = config.base_url.rstrip("/") + "/embeddings"

    async def probe(self, key: str, timeout_s: float) -> int | None:
        headers = {"Authorization": f"Bearer {key}", **self._extra_headers}
        return await probe_status(self._session, self._models_url, headers, timeout_s)

    async def open(
        self, body: dict[str, Any], key: str, *, stream: bool, timeouts: Timeouts
    ) -> OpenAIStream | CompletionStream:
        if not self._keep_cache_control:
            body = without_cache_control(body)
        body = without_signatures(body)
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            **self._extra_headers,
        }
        try:
            resp = await post_json(
                self._session, self._url, orjson.dumps(body), headers, timeouts, stream=stream
            )
        except UpstreamError as err:
            rescued = failed_generation_stream(err, body)
            if rescued is None:
                raise
            return rescued
        if not stream:
            return await _read_completion(resp)
        return OpenAIStream(resp, timeouts.stall)


    async def embed(self, model: str, req: EmbeddingRequest, key: str, timeouts: Timeouts) -> EmbeddingAnswer:
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            **self._extra_headers,
        }
        payload = orjson.dumps(openai_embedding_body(req, model))
        resp = await post_json(self._session, self._embeddings_url, payload, headers, timeouts, stream=False)
        return openai_embedding_answer(await read_body(resp), len(req.inputs), resp.headers)


class OpenAIStream(SSEStream):
    """Async iterator over the canonical chunks of one streamed upstream answer."""

    __slots__ = ()

    def _frames(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            if payload == b"[DONE]":
                self.saw_done = True
                return
            try:
                frame = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue  # malformed frames are skipped, as every OpenAI client does
            if isinstance(frame, dict):
                self._pending.append(frame)


async def _read_completion(resp: aiohttp.ClientResponse) -> CompletionStream:
    raw = await read_body(resp)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamError("malformed upstream completion: not JSON") from exc
    if not isinstance(body, dict):
        raise UpstreamError("malformed upstream completion: not an object")
    if "error" in body and not body.get("choices"):
        raise UpstreamError(f"in-band provider error: {error_message_of(body)}", body=body)
    return CompletionStream(completion_to_chunks(body), resp.headers)


def completion_to_chunks(body: dict[str, Any]) -> list[Chunk]:
    """Turn a ``chat.completion`` into one canonical chunk carrying the whole turn."""
    choices = body.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    delta: dict[str, Any] = {"role": "assistant"}
    for field in ("content", "reasoning_content", "reasoning"):
        if message.get(field) is not None:
            delta[field] = message[field]
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        delta["tool_calls"] = [
            {**call, "index": i} for i, call in enumerate(calls) if isinstance(call, dict)
        ]
    chunk: Chunk = {
        "id": body.get("id") or f"chatcmpl-{int(time.time() * 1000)}",
        "object": "chat.completion.chunk",
        "created": body.get("created") or int(time.time()),
        "model": body.get("model") or "",
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}],
    }
    if body.get("usage"):
        chunk["usage"] = body["usage"]
    return [chunk]

