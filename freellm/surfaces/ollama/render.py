"""Canonical chunks and outcomes → Ollama's answers (spec/surfaces.md §5).

A stream is NDJSON (``application/x-ndjson``), one object per line: text as
``{model, created_at, message: {role, content}, done: false}`` (``response`` on ``/api/generate``),
reasoning as ``thinking`` lines, tool calls gathered into one line at the end (Ollama's arguments are
objects, so they are sent whole), then the final ``done: true`` line with ``done_reason`` and the
timing and token statistics Ollama clients display. A failure after the commit point is one
``{"error": "...", "done": true}`` line. Durations are nanoseconds, as Ollama reports them.

:class:`OllamaRenderer` is pure apart from its clock (injectable), one per request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from freellm.core.chunks import Chunk
from freellm.core.tokens import estimate_text_tokens
from freellm.engine.context import TurnOutcome
from freellm.errors import ClientError, Exhausted

__all__ = [
    "OllamaRenderer",
    "Surface",
    "completion_body",
    "created_at",
    "load_body",
    "ollama_error_body",
]

Surface = Literal["chat", "generate"]
_NEWLINE = b"\n"


def created_at(now: float | None = None) -> str:
    """Ollama's timestamp: RFC 3339 in UTC with microseconds (``2026-12-03T10:00:00.123456Z``)."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ollama_error_body(exc: ClientError | Exhausted) -> dict[str, Any]:
    """``{"error": "<message>"}``: the one error shape Ollama clients read."""
    return {"error": exc.message}


def load_body(model: str, surface: Surface, *, unload: bool) -> dict[str, Any]:
    """The answer to an empty chat or prompt (load, or with ``keep_alive: 0`` unload): no upstream call."""
    body: dict[str, Any] = {"model": model, "created_at": created_at()}
    if surface == "chat":
        body["message"] = {"role": "assistant", "content": ""}
    else:
        body["response"] = ""
    body["done"] = True
    body["done_reason"] = "unload" if unload else "load"
    return body


def _done_reason(finish: str | None) -> str:
    # Ollama has no "tool_calls" reason: a turn that ends in tool calls is a "stop".
    return "length" if finish == "length" else "stop"


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text) if text.strip() else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _stats(*, total_ns: int, first_ns: int | None, prompt_tokens: int, output_tokens: int) -> dict[str, Any]:
    total = max(1, total_ns)
    prompt = max(1, min(total, first_ns if first_ns is not None else total // 2))
    return {
        "total_duration": total,
        "load_duration": 0,
        "prompt_eval_count": max(1, prompt_tokens),
        "prompt_eval_duration": prompt,
        "eval_count": max(1, output_tokens),
        "eval_duration": max(1, total - prompt),
    }


class OllamaRenderer:
    """Renders canonical chunk batches as Ollama NDJSON lines (see the module)."""

    content_type = "application/x-ndjson"

    __slots__ = (
        "_calls",
        "_chars",
        "_clock",
        "_finish",
        "_first_ns",
        "_model",
        "_show_thinking",
        "_started_ns",
        "_surface",
        "_usage",
    )

    def __init__(
        self,
        model: str,
        surface: Surface,
        *,
        show_thinking: bool = True,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._model = model
        self._surface = surface
        self._show_thinking = show_thinking
        self._clock = clock
        self._started_ns = clock()
        self._first_ns: int | None = None
        self._calls: dict[int, list[str]] = {}
        """Tool calls by index: [name, arguments so far]."""
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}
        self._chars = 0

    def _line(self, fields: dict[str, Any]) -> bytes:
        return orjson.dumps({"model": self._model, "created_at": created_at(), **fields}) + _NEWLINE

    def _text_line(self, *, content: str = "", thinking: str | None = None) -> bytes:
        if self._surface == "chat":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if thinking is not None:
                message["thinking"] = thinking
            return self._line({"message": message, "done": False})
        fields: dict[str, Any] = {"response": content}
        if thinking is not None:
            fields["thinking"] = thinking
        fields["done"] = False
        return self._line(fields)

    def chunks(self, chunks: list[Chunk]) -> bytes:
        out: list[bytes] = []
        for chunk in chunks:
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                self._usage = usage
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                finish = choice.get("finish_reason")
                if finish:
                    self._finish = finish
                thinking = delta.get("reasoning_content")
                if isinstance(thinking, str) and thinking and self._show_thinking:
                    self._mark_first()
                    out.append(self._text_line(thinking=thinking))
                text = delta.get("content")
                if isinstance(text, str) and text:
                    self._mark_first()
                    self._chars += len(text)
                    out.append(self._text_line(content=text))
                for call in delta.get("tool_calls") or ():
                    self._mark_first()
                    slot = self._calls.setdefault(int(call.get("index") or 0), ["", ""])
                    fn = call.get("function") or {}
                    if fn.get("name"):
                        slot[0] = fn["name"]
                    if fn.get("arguments"):
                        slot[1] += fn["arguments"]
        return b"".join(out)

    def _mark_first(self) -> None:
        if self._first_ns is None:
            self._first_ns = self._clock() - self._started_ns

    def stream_error(self, provider: str, message: str) -> bytes:
        return orjson.dumps({"error": f"provider error ({provider}): {message}", "done": True}) + _NEWLINE

    def done(self) -> bytes:
        out: list[bytes] = []
        if self._calls and self._surface == "chat":
            calls = [
                {"function": {"name": name, "arguments": _arguments(args)}}
                for _, (name, args) in sorted(self._calls.items())
            ]
            out.append(self._line({"message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": False}))
        prompt = self._usage.get("prompt_tokens")
        completion = self._usage.get("completion_tokens")
        stats = _stats(
            total_ns=self._clock() - self._started_ns,
            first_ns=self._first_ns,
            prompt_tokens=prompt if isinstance(prompt, int) else 0,
            output_tokens=completion if isinstance(completion, int) else estimate_text_tokens(self._chars),
        )
        final: dict[str, Any] = (
            {"message": {"role": "assistant", "content": ""}} if self._surface == "chat" else {"response": ""}
        )
        final["done"] = True
        final["done_reason"] = _done_reason(self._finish)
        if self._surface == "generate":
            final["context"] = []
        out.append(self._line({**final, **stats}))
        return b"".join(out)


def completion_body(
    outcome: TurnOutcome, model: str, surface: Surface, *, show_thinking: bool, started_ns: int
) -> dict[str, Any]:
    """The one object of a ``stream: false`` answer."""
    result = outcome.result
    total = time.monotonic_ns() - started_ns
    first = outcome.ttfb_ms * 1_000_000 if outcome.ttfb_ms is not None else None
    body: dict[str, Any] = {"model": model, "created_at": created_at()}
    thinking = result.reasoning if show_thinking and result.reasoning else None
    if surface == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": result.text}
        if thinking is not None:
            message["thinking"] = thinking
        if result.tool_calls:
            message["tool_calls"] = [
                {"function": {"name": c.name, "arguments": _arguments(c.arguments)}}
                for c in result.tool_calls
            ]
        body["message"] = message
    else:
        body["response"] = result.text
        if thinking is not None:
            body["thinking"] = thinking
    body["done"] = True
    body["done_reason"] = _done_reason(result.finish_reason)
    if surface == "generate":
        body["context"] = []
    body.update(_stats(total_ns=total, first_ns=first, prompt_tokens=outcome.tokens_in, output_tokens=outcome.tokens_out))
    return body
