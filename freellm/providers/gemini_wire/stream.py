"""Gemini ``GenerateContentResponse`` objects → canonical ``chat.completion.chunk`` dicts.

:class:`GeminiStreamTranslator` is sans-IO: ``feed(response)`` takes one decoded response object (one
``data:`` frame of ``:streamGenerateContent?alt=sse``, or the whole ``:generateContent`` body) and returns
the chunks it produces; ``finish()`` flushes what is left at the end of input. Mapping:

* parts with ``thought: true`` → ``reasoning_content``; other ``text`` parts → ``content`` (the first
  chunk also carries ``role: assistant``); empty text is skipped. A thought part's ``thoughtSignature``
  → ``reasoning_signature`` (in the same chunk as its text, or alone for a text-less thought part); the
  signatures of text parts are not the reasoning's and are ignored;
* each ``functionCall`` part → one complete tool call (``index`` in call order, ``id`` = Gemini's
  ``functionCall.id`` or a generated ``call_<hex>``, ``name``, the ``args`` object as JSON ``arguments``,
  and the part's ``thoughtSignature`` as ``thought_signature``). A call repeated in a later frame (same
  id or, without ids, same name and arguments) is sent once. Each call is reported to ``on_call`` so the
  provider can remember its signature for the next turn; a signature that arrives on a content-less part
  is given to the next call of the same response that has none;
* ``finishReason`` → the finish chunk: ``tool_calls`` when the answer made calls, else ``MAX_TOKENS`` →
  ``length``, ``SAFETY``/``RECITATION``/``BLOCKLIST``/``PROHIBITED_CONTENT``/``SPII``/``IMAGE_SAFETY``/
  ``LANGUAGE`` → ``content_filter``, anything else (``STOP``, ``MALFORMED_FUNCTION_CALL``, ``OTHER``…) →
  ``stop``. A prompt blocked outright (``promptFeedback.blockReason``, no candidates) → ``content_filter``
  with no content (the pump then fails over: an empty completion);
* ``usageMetadata`` (cumulative, on every frame) is kept and sent once, on the finish chunk:
  ``prompt_tokens`` = prompt (+ tool-use prompt) tokens, ``completion_tokens`` = candidates + thoughts
  tokens, ``total_tokens`` = Gemini's total; thoughts and cached tokens also in the ``*_details``;
* an ``{"error": …}`` object raises ``UpstreamError("in-band provider error: <STATUS>: <message>")``.

:attr:`GeminiStreamTranslator.done` says a ``finishReason`` arrived: Gemini streams have no end marker, so
a stream that ends without one was cut.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any, Final

import orjson

from freellm.core.chunks import Chunk, make_chunk
from freellm.providers.gemini_wire.errors import inband_error
from freellm.providers.gemini_wire.signatures import canonical_args

__all__ = [
    "FINISH_REASONS",
    "CallSink",
    "GeminiStreamTranslator",
    "finish_reason_of",
    "new_call_id",
    "response_to_chunks",
    "usage_of",
]

FINISH_REASONS: Final[dict[str, str]] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}

CallSink = Callable[[str, str, dict[str, Any], str | None, bool], None]
"""``on_call(call_id, name, args, thought_signature, native_id)``: one function call was emitted."""


def new_call_id() -> str:
    """``call_<24 hex>``: unique enough to key the signature cache across an app's lifetime."""
    return "call_" + secrets.token_hex(12)


def finish_reason_of(reason: Any) -> str | None:
    """Canonical finish reason for a Gemini ``finishReason`` (unknown non-empty → ``stop``)."""
    if not isinstance(reason, str) or not reason or reason == "FINISH_REASON_UNSPECIFIED":
        return None
    return FINISH_REASONS.get(reason.upper(), "stop")


def _count(meta: dict[str, Any], key: str) -> int:
    value = meta.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(meta: Any) -> dict[str, Any] | None:
    """Canonical usage for a ``usageMetadata`` object (None when it has no counts)."""
    if not isinstance(meta, dict) or not meta:
        return None
    prompt = _count(meta, "promptTokenCount") + _count(meta, "toolUsePromptTokenCount")
    thoughts = _count(meta, "thoughtsTokenCount")
    completion = _count(meta, "candidatesTokenCount") + thoughts
    total = _count(meta, "totalTokenCount") or prompt + completion
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
    cached = _count(meta, "cachedContentTokenCount")
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if thoughts:
        usage["completion_tokens_details"] = {"reasoning_tokens": thoughts}
    return usage


class GeminiStreamTranslator:
    """One Gemini answer, response object by response object. Create one per attempt."""

    __slots__ = (
        "_calls",
        "_created",
        "_id",
        "_id_factory",
        "_model",
        "_on_call",
        "_role_sent",
        "_seen_calls",
        "_usage",
        "_usage_sent",
        "done",
    )

    def __init__(
        self,
        *,
        created: int | None = None,
        model: str = "",
        on_call: CallSink | None = None,
        id_factory: Callable[[], str] = new_call_id,
    ) -> None:
        self._created = int(time.time()) if created is None else created
        self._id = ""
        self._model = model
        self._on_call = on_call
        self._id_factory = id_factory
        self._calls = 0
        self._seen_calls: set[tuple[str, ...]] = set()
        self._role_sent = False
        self._usage: dict[str, Any] | None = None
        self._usage_sent = False
        self.done = False
        """A ``finishReason`` arrived: the answer ended properly."""

    def feed(self, response: dict[str, Any]) -> list[Chunk]:
        """Chunks for one response object. Raises :class:`UpstreamError` for an error object."""
        candidates = response.get("candidates")
        if "error" in response and not candidates:
            raise inband_error(response)
        rid = response.get("responseId")
        if isinstance(rid, str) and rid and not self._id:
            self._id = rid
        version = response.get("modelVersion")
        if isinstance(version, str) and version:
            self._model = version
        usage = usage_of(response.get("usageMetadata"))
        if usage is not None:
            self._usage = usage
            self._usage_sent = False

        out: list[Chunk] = []
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if not isinstance(candidate, dict):
            feedback = response.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                out.append(self._finish_chunk("content_filter"))
            return out
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if isinstance(parts, list):
            out.extend(self._parts(parts))
        finish = finish_reason_of(candidate.get("finishReason"))
        if finish is not None:
            out.append(self._finish_chunk("tool_calls" if self._calls else finish))
        return out

    def finish(self) -> list[Chunk]:
        """At end of input: the usage, when no finish chunk carried it."""
        if self._usage is None or self._usage_sent:
            return []
        chunk = self._chunk({})
        chunk["choices"] = []
        chunk["usage"] = self._usage
        self._usage_sent = True
        return [chunk]

    # -- parts -------------------------------------------------------------------------------------

    def _parts(self, parts: list[Any]) -> list[Chunk]:
        out: list[Chunk] = []
        loose_signature: str | None = None
        in_frame: set[tuple[str, ...]] = set()
        for part in parts:
            if not isinstance(part, dict):
                continue
            signature = part.get("thoughtSignature")
            signature = signature if isinstance(signature, str) and signature else None
            call = part.get("functionCall")
            if isinstance(call, dict):
                chunk = self._function_call(call, signature or loose_signature, in_frame)
                if signature is None:
                    loose_signature = None
                if chunk is not None:
                    out.append(chunk)
                continue
            text = part.get("text")
            thought = part.get("thought") is True
            if isinstance(text, str) and text:
                delta: dict[str, Any] = {"reasoning_content" if thought else "content": text}
                if thought and signature is not None:
                    delta["reasoning_signature"] = signature
                out.append(self._chunk(delta))
            elif signature is not None:
                if thought:
                    out.append(self._chunk({"reasoning_signature": signature}))
                loose_signature = signature  # a signature-only part: for the next call, if any
        return out

    def _function_call(
        self, call: dict[str, Any], signature: str | None, in_frame: set[tuple[str, ...]]
    ) -> Chunk | None:
        name = call.get("name")
        if not isinstance(name, str) or not name:
            return None
        raw_args = call.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        given_id = call.get("id")
        native = isinstance(given_id, str) and bool(given_id)
        key: tuple[str, ...] = ("id", str(given_id)) if native else ("call", name, canonical_args(args))
        if key in self._seen_calls and key not in in_frame:
            return None  # the same call repeated by a later frame
        self._seen_calls.add(key)
        in_frame.add(key)
        call_id = given_id if native else self._id_factory()
        assert isinstance(call_id, str)
        index = self._calls
        self._calls += 1
        if self._on_call is not None:
            self._on_call(call_id, name, args, signature, native)
        delta: dict[str, Any] = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(args).decode()},
        }
        if signature is not None:
            delta["thought_signature"] = signature
        return self._chunk({"tool_calls": [delta]})

    # -- chunks ------------------------------------------------------------------------------------

    def _finish_chunk(self, finish: str) -> Chunk:
        self.done = True
        chunk = self._chunk({}, finish)
        if self._usage is not None:
            chunk["usage"] = self._usage
            self._usage_sent = True
        return chunk

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> Chunk:
        if not self._role_sent and delta:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        return make_chunk(self._id, self._created, self._model, delta, finish)


def response_to_chunks(
    body: dict[str, Any],
    *,
    created: int | None = None,
    model: str = "",
    on_call: CallSink | None = None,
    id_factory: Callable[[], str] = new_call_id,
) -> list[Chunk]:
    """A non-stream ``generateContent`` answer as canonical chunks (the same mapping as a stream).

    Raises :class:`UpstreamError` for an error object.
    """
    translator = GeminiStreamTranslator(created=created, model=model, on_call=on_call, id_factory=id_factory)
    return translator.feed(body) + translator.finish()
