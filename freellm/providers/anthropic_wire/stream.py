"""Anthropic Messages answers → canonical ``chat.completion.chunk`` dicts.

:class:`AnthropicStreamTranslator` is sans-IO: ``feed(event, data)`` takes one SSE event (its name and
decoded ``data:`` object) and returns the chunks it produces; ``finish()`` flushes what a stream cut
short left behind. Mapping:

* ``message_start`` → a role chunk (id and model remembered; ``usage.input_tokens`` kept);
* ``thinking`` blocks / ``thinking_delta`` → ``reasoning_content``; the block's ``signature_delta``
  (one per thinking block, at its end; a non-empty ``signature`` already in ``content_block_start``
  too) → a chunk of its own carrying ``reasoning_signature``; a ``redacted_thinking`` block (its
  ``data`` has no canonical place) → ``reasoning_signature: ""``, which marks the turn's reasoning as
  not replayable (sending the thinking back without the redacted block would be a modified sequence);
* ``text`` blocks / ``text_delta`` → ``content``;
* ``tool_use`` blocks → a tool-call delta with ``index`` (tool order), ``id``, ``name`` and empty
  arguments, then one delta per non-empty ``input_json_delta`` fragment; a block whose input came whole
  in ``content_block_start`` (no fragments) sends it as one fragment at ``content_block_stop``;
  server tools (``server_tool_use``, their results) run at Anthropic and are not client tool calls;
* ``message_delta`` → a finish chunk (``end_turn``/``stop_sequence``/``pause_turn`` → ``stop``,
  ``max_tokens``/``model_context_window_exceeded`` → ``length``, ``tool_use`` → ``tool_calls``,
  ``refusal`` → ``content_filter``) carrying usage: ``prompt_tokens`` = input + cache-creation +
  cache-read tokens (OpenAI counts cached prompt tokens in the prompt), ``completion_tokens`` = output;
* ``message_stop`` → :attr:`done` (the stream's ``saw_done``); ``ping`` and unknown events → nothing;
* ``error`` → raises ``UpstreamError("in-band provider error: <type>: <message>")``.

:func:`message_to_chunks` does the same for a non-stream ``message`` object: one chunk with the whole turn
(its ``reasoning_signature`` is the thinking block's signature when there is exactly one signed block
and no redacted one, else ``""``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

import orjson

from freellm.core.chunks import Chunk, make_chunk
from freellm.errors import UpstreamError
from freellm.providers.anthropic_wire.errors import inband_error

__all__ = ["FINISH_REASONS", "AnthropicStreamTranslator", "message_to_chunks", "usage_of"]

FINISH_REASONS: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def finish_reason_of(stop_reason: Any) -> str | None:
    """Canonical finish reason for an Anthropic ``stop_reason`` (unknown non-null → ``stop``)."""
    if not isinstance(stop_reason, str) or not stop_reason:
        return None
    return FINISH_REASONS.get(stop_reason, "stop")


@dataclass(slots=True)
class _Tokens:
    input: int | None = None
    output: int | None = None
    cache_creation: int = 0
    cache_read: int = 0

    def update(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for field, attr in (("input_tokens", "input"), ("output_tokens", "output")):
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, attr, value)
        for field, attr in (
            ("cache_creation_input_tokens", "cache_creation"),
            ("cache_read_input_tokens", "cache_read"),
        ):
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, attr, value)

    def canonical(self) -> dict[str, Any] | None:
        if self.input is None and self.output is None:
            return None
        prompt = (self.input or 0) + self.cache_creation + self.cache_read
        completion = self.output or 0
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if self.cache_read:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cache_read}
        return usage


def usage_of(usage: Any) -> dict[str, Any] | None:
    """Canonical usage for an Anthropic ``usage`` object (None when it has no token counts)."""
    tokens = _Tokens()
    tokens.update(usage)
    return tokens.canonical()


@dataclass(slots=True)
class _ToolBlock:
    ordinal: int
    whole_input: Any = None
    fragments: bool = False


class AnthropicStreamTranslator:
    """One streamed Anthropic answer, event by event. Create one per attempt."""

    __slots__ = ("_blocks", "_created", "_id", "_model", "_tokens", "_tools", "done")

    def __init__(self, *, created: int | None = None, model: str = "") -> None:
        self._created = int(time.time()) if created is None else created
        self._id = ""
        self._model = model
        self._tokens = _Tokens()
        self._blocks: dict[int, str | _ToolBlock] = {}
        self._tools = 0
        self.done = False
        """``message_stop`` was seen: the answer ended properly."""

    def feed(self, event: str, data: dict[str, Any]) -> list[Chunk]:
        """Chunks for one SSE event. Raises :class:`UpstreamError` for an ``error`` event."""
        if event == "content_block_delta":
            return self._delta(data)
        if event == "content_block_start":
            return self._start(data)
        if event == "content_block_stop":
            return self._stop(data.get("index"))
        if event == "message_start":
            return self._message_start(data)
        if event == "message_delta":
            return self._message_delta(data)
        if event == "message_stop":
            self.done = True
            return []
        if event == "error":
            raise inband_error(data)
        return []  # ping, and events newer than this translator

    def finish(self) -> list[Chunk]:
        """At end of input: tool inputs of blocks that never got their ``content_block_stop``."""
        out: list[Chunk] = []
        for index in list(self._blocks):
            out.extend(self._stop(index))
        return out

    # -- events ------------------------------------------------------------------------------------

    def _message_start(self, data: dict[str, Any]) -> list[Chunk]:
        message = data.get("message")
        if isinstance(message, dict):
            mid = message.get("id")
            if isinstance(mid, str):
                self._id = mid
            model = message.get("model")
            if isinstance(model, str) and model:
                self._model = model
            self._tokens.update(message.get("usage"))
        return [self._chunk({"role": "assistant"})]

    def _start(self, data: dict[str, Any]) -> list[Chunk]:
        index = data.get("index")
        block = data.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        kind = block.get("type")
        if kind == "tool_use":
            tool = _ToolBlock(self._tools)
            self._tools += 1
            self._blocks[index] = tool
            given = block.get("input")
            if given:
                tool.whole_input = given
            call = {
                "index": tool.ordinal,
                "id": block.get("id") or f"toolu_stream_{tool.ordinal}",
                "type": "function",
                "function": {"name": block.get("name") or "", "arguments": ""},
            }
            return [self._chunk({"tool_calls": [call]})]
        self._blocks[index] = kind if isinstance(kind, str) else ""
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                return [self._chunk({"content": text})]
        elif kind == "thinking":
            out: list[Chunk] = []
            thinking = block.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.append(self._chunk({"reasoning_content": thinking}))
            signature = block.get("signature")
            if isinstance(signature, str) and signature:
                out.append(self._chunk({"reasoning_signature": signature}))
            return out
        elif kind == "redacted_thinking":
            return [self._chunk({"reasoning_signature": ""})]
        return []

    def _delta(self, data: dict[str, Any]) -> list[Chunk]:
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            return [self._chunk({"content": text})] if isinstance(text, str) and text else []
        if kind == "thinking_delta":
            thinking = delta.get("thinking")
            if isinstance(thinking, str) and thinking:
                return [self._chunk({"reasoning_content": thinking})]
            return []
        if kind == "signature_delta":
            signature = delta.get("signature")
            # The whole signature of the block arrives in one event (the SDKs assign, not append).
            return [self._chunk({"reasoning_signature": signature})] if isinstance(signature, str) else []
        if kind == "input_json_delta":
            index = data.get("index")
            tool = self._blocks.get(index) if isinstance(index, int) else None
            fragment = delta.get("partial_json")
            if not isinstance(tool, _ToolBlock) or not isinstance(fragment, str) or not fragment:
                return []
            tool.fragments = True
            return [
                self._chunk({"tool_calls": [{"index": tool.ordinal, "function": {"arguments": fragment}}]})
            ]
        return []  # citations_delta, …

    def _stop(self, index: Any) -> list[Chunk]:
        block = self._blocks.pop(index, None) if isinstance(index, int) else None
        if isinstance(block, _ToolBlock) and not block.fragments and block.whole_input:
            arguments = orjson.dumps(block.whole_input).decode()
            return [
                self._chunk({"tool_calls": [{"index": block.ordinal, "function": {"arguments": arguments}}]})
            ]
        return []

    def _message_delta(self, data: dict[str, Any]) -> list[Chunk]:
        self._tokens.update(data.get("usage"))
        delta = data.get("delta")
        finish = finish_reason_of(delta.get("stop_reason")) if isinstance(delta, dict) else None
        usage = self._tokens.canonical()
        if finish is None:
            if usage is None:
                return []
            chunk = self._chunk({})
            chunk["choices"] = []
        else:
            chunk = self._chunk({}, finish)
        if usage is not None:
            chunk["usage"] = usage
        return [chunk]

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> Chunk:
        return make_chunk(self._id, self._created, self._model, delta, finish)


def message_to_chunks(body: dict[str, Any], *, created: int | None = None) -> list[Chunk]:
    """A non-stream Anthropic ``message`` as one canonical chunk carrying the whole turn.

    Raises :class:`UpstreamError` for an error object (``type: error``) or a body that is not a message.
    """
    if body.get("type") == "error" or ("error" in body and "content" not in body):
        raise inband_error(body)
    content = body.get("content")
    if not isinstance(content, list):
        raise UpstreamError("malformed upstream completion: no content array")
    texts: list[str] = []
    thinking: list[str] = []
    signatures: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking.append(block["thinking"])
            signature = block.get("signature")
            signatures.append(signature if isinstance(signature, str) else "")
        elif kind == "redacted_thinking":
            signatures.append("")
        elif kind == "tool_use":
            n = len(calls)
            calls.append(
                {
                    "index": n,
                    "id": block.get("id") or f"toolu_message_{n}",
                    "type": "function",
                    "function": {
                        "name": block.get("name") or "",
                        "arguments": orjson.dumps(block.get("input") or {}).decode(),
                    },
                }
            )
    delta: dict[str, Any] = {"role": "assistant"}
    if texts:
        delta["content"] = "".join(texts)
    if thinking:
        delta["reasoning_content"] = "".join(thinking)
    if len(set(signatures)) == 1 and signatures[0]:
        # One signed thinking block (or the same signature throughout): the reasoning is replayable.
        delta["reasoning_signature"] = signatures[0]
    elif signatures:
        delta["reasoning_signature"] = ""
    if calls:
        delta["tool_calls"] = calls
    mid = body.get("id")
    model = body.get("model")
    chunk = make_chunk(
        mid if isinstance(mid, str) else "",
        int(time.time()) if created is None else created,
        model if isinstance(model, str) else "",
        delta,
        finish_reason_of(body.get("stop_reason")),
    )
    usage = usage_of(body.get("usage"))
    if usage is not None:
        chunk["usage"] = usage
    return [chunk]
