"""The streaming pump: one attempt's state machine from upstream chunks to client chunks.

Pure and sans-IO (architecture rule 1): :meth:`StreamPump.feed` takes one canonical upstream chunk and
returns the chunks to send to the client *now*; :meth:`StreamPump.finish` closes the turn. The pump
decides the **commit point** — nothing is returned until the first real payload (non-empty content),
so any failure before it can still be retried on another route invisibly. Role, keep-alive and
reasoning-only chunks wait in a preamble; tool-call deltas are accumulated and emitted once, complete;
usage is remembered wherever it lands and emitted once, after our own finish chunk.

Failures are raised as :class:`UpstreamError`; whether that means failover (not committed) or an
in-band error frame (committed) is the driver's call, based on :attr:`StreamPump.committed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from freellm.core.chunks import Chunk, make_chunk, make_usage_chunk
from freellm.engine.dialects import could_become_marker, starts_with_marker
from freellm.errors import UpstreamError

__all__ = ["PumpResult", "Rescue", "StreamPump", "ToolCall"]

Mode = Literal["undecided", "passthrough", "dialect"]


@dataclass(slots=True)
class ToolCall:
    """One complete tool call assembled from its deltas."""

    id: str
    name: str
    arguments: str

    def as_delta(self, index: int) -> dict[str, Any]:
        return {
            "index": index,
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class Rescue:
    """Outcome of parsing held dialect text: calls (None = detected but unparseable) and leftover text."""

    calls: list[ToolCall] | None
    clean_text: str


RescueFn = Callable[[str], Rescue]
RepairFn = Callable[[list[ToolCall]], list[ToolCall]]


def _no_rescue(text: str) -> Rescue:
    return Rescue(calls=None, clean_text=text)


def _no_repair(calls: list[ToolCall]) -> list[ToolCall]:
    return calls


@dataclass(slots=True)
class PumpResult:
    """Everything the turn produced, for accounting and for folding a non-stream reply."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    chunk_id: str = ""
    created: int = 0
    upstream_model: str | None = None


class StreamPump:
    """State machine for one upstream attempt. Create a fresh pump per attempt."""

    __slots__ = (
        "_acc",
        "_chunk_id",
        "_created",
        "_finish",
        "_held",
        "_hold_limit",
        "_model",
        "_parts",
        "_preamble",
        "_reasoning",
        "_repair",
        "_rescue",
        "_result_calls",
        "_text_len",
        "_upstream_model",
        "_wants_tools",
        "committed",
        "first_token",
        "mode",
        "usage",
    )

    def __init__(
        self,
        model: str,
        *,
        wants_tools: bool = False,
        hold_limit: int = 256,
        rescue: RescueFn = _no_rescue,
        repair: RepairFn = _no_repair,
    ) -> None:
        self._model = model
        self._wants_tools = wants_tools
        self._hold_limit = hold_limit
        self._rescue = rescue
        self._repair = repair
        self.mode: Mode = "undecided"
        self.committed = False
        self.first_token = False
        """Set once any content or reasoning arrived (TTFB counts reasoning)."""
        self.usage: dict[str, Any] | None = None
        self._held = ""
        self._parts: list[str] = []  # text already sent (passthrough)
        self._text_len = 0
        self._reasoning: list[str] = []
        self._preamble: list[Chunk] = []
        self._acc: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self._finish: str | None = None
        self._chunk_id = ""
        self._created = 0
        self._upstream_model: str | None = None
        self._result_calls: list[ToolCall] = []

    # -- per chunk ---------------------------------------------------------------------------------
    def feed(self, chunk: Chunk) -> list[Chunk]:
        if not self._chunk_id:
            self._capture_meta(chunk)
        choices = chunk.get("choices")
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        if not choices:
            err = chunk.get("error")
            if err is not None:
                raise UpstreamError(f"in-band provider error: {_error_text(err)}", body=chunk)
            return []
        if usage is not None:
            del chunk["usage"]
        choice = choices[0]
        finish = choice.get("finish_reason")
        if finish:
            self._finish = finish
            choice["finish_reason"] = None
        delta = choice.get("delta")
        if not delta:
            return []
        chunk["model"] = self._model
        calls = delta.get("tool_calls")
        if calls is not None:
            del delta["tool_calls"]
            if calls:
                self._accumulate_calls(calls)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            self._reasoning.append(reasoning)
            self.first_token = True
        content = delta.get("content")
        if content and not isinstance(content, str):
            content = _flatten_content(content)
            delta["content"] = content
        if not content:
            if reasoning or "role" in delta:
                if self.committed:
                    return [chunk]
                self._preamble.append(chunk)
            return []
        self.first_token = True
        mode = self.mode
        if mode == "passthrough":
            self._parts.append(content)
            self._text_len += len(content)
            return [chunk]
        self._held += content
        if mode == "dialect":
            return []
        return self._decide(chunk, delta)

    def _decide(self, chunk: Chunk, delta: dict[str, Any]) -> list[Chunk]:
        if self._wants_tools:
            probe = self._held.lstrip()
            if starts_with_marker(probe):
                self.mode = "dialect"
                return []
            if could_become_marker(probe) and len(probe) <= self._hold_limit:
                return []
        self.mode = "passthrough"
        delta["content"] = self._held
        self._parts.append(self._held)
        self._text_len += len(self._held)
        self._held = ""
        return self._commit([chunk])

    def _commit(self, chunks: list[Chunk]) -> list[Chunk]:
        self.committed = True
        if self._preamble:
            chunks = self._preamble + chunks
            self._preamble = []
        return chunks

    def _accumulate_calls(self, calls: list[Any]) -> None:
        acc = self._acc
        for pos, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            index = call.get("index", pos)
            slot = acc.get(index)
            if slot is None:
                slot = acc[index] = ["", "", ""]
            if call.get("id") and not slot[0]:
                slot[0] = call["id"]
            fn = call.get("function") or {}
            if fn.get("name"):
                slot[1] += fn["name"]
            args = fn.get("arguments")
            if args:
                slot[2] += args if isinstance(args, str) else _dumps(args)

    def _capture_meta(self, chunk: Chunk) -> None:
        cid = chunk.get("id")
        self._chunk_id = cid if isinstance(cid, str) and cid else f"chatcmpl-{int(time.time() * 1000)}"
        created = chunk.get("created")
        self._created = created if isinstance(created, int) else int(time.time())
        model = chunk.get("model")
        if isinstance(model, str) and model:
            self._upstream_model = model

    # -- end of stream -----------------------------------------------------------------------------
    def finish(self, *, saw_done: bool, include_usage: bool = False, usage_estimate: int = 0) -> list[Chunk]:
        """Close the turn after a clean upstream end. Raises UpstreamError for a dead turn."""
        if not saw_done and self._finish is None:
            raise UpstreamError("stream ended unexpectedly: no [DONE] and no finish_reason", transport=True)
        if not self._chunk_id:
            self._capture_meta({})
        calls = self._finished_calls()
        held = self._held
        if self._wants_tools and (self.mode == "dialect" or starts_with_marker(held.lstrip())):
            rescue = self._rescue(held)
            if rescue.calls is None:
                raise UpstreamError("unparseable inline tool-call dialect", skip_model=True)
            calls.extend(rescue.calls)
            held = rescue.clean_text.strip()
        # Repaired calls whose arguments are still not JSON are dropped: no client can execute them.
        calls = [c for c in self._repair(calls) if _is_json(c.arguments)]
        self._held = held
        if not held and not self._text_len and not calls:
            length = self._finish == "length"
            raise UpstreamError(
                "empty completion" + (" (finish_reason length)" if length else ""),
                skip_bench=length,
            )
        out: list[Chunk] = []
        cid, created, model = self._chunk_id, self._created, self._model
        if held:
            out.append(make_chunk(cid, created, model, {"content": held}))
            self._parts.append(held)
            self._text_len += len(held)
            self._held = ""
        if calls:
            out.append(make_chunk(cid, created, model, {"tool_calls": [c.as_delta(i) for i, c in enumerate(calls)]}))
        out.append(make_chunk(cid, created, model, {}, self._final_reason(calls)))
        usage = self.usage
        if usage is None and include_usage:
            usage = {"prompt_tokens": 0, "completion_tokens": usage_estimate, "total_tokens": usage_estimate}
        if usage is not None:
            out.append(make_usage_chunk(cid, created, model, usage))
        self._result_calls = calls
        return self._commit(out) if not self.committed else out

    def _finished_calls(self) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for n, index in enumerate(sorted(self._acc)):
            call_id, name, args = self._acc[index]
            if not name:
                continue
            calls.append(ToolCall(id=call_id or f"call_stream_{n}", name=name, arguments=args or "{}"))
        return calls

    def _final_reason(self, calls: list[ToolCall]) -> str:
        if calls:
            return "tool_calls"
        if self._finish and self._finish != "tool_calls":
            return self._finish
        return "stop"

    # -- results -----------------------------------------------------------------------------------
    def result(self) -> PumpResult:
        """The whole turn, valid after :meth:`finish` returned."""
        calls = self._result_calls
        return PumpResult(
            text="".join(self._parts),
            reasoning="".join(self._reasoning),
            tool_calls=calls,
            finish_reason=self._final_reason(calls),
            usage=self.usage,
            chunk_id=self._chunk_id,
            created=self._created,
            upstream_model=self._upstream_model,
        )

    @property
    def output_chars(self) -> int:
        """Characters produced so far (text + reasoning + tool arguments), for token estimates."""
        args = sum(len(slot[2]) for slot in self._acc.values())
        return self._text_len + len(self._held) + sum(len(r) for r in self._reasoning) + args


def _flatten_content(content: Any) -> str:
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return "" if content is None else str(content)


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        msg = err.get("message")
        return msg if isinstance(msg, str) else str(err)[:300]
    return str(err)[:300]


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
