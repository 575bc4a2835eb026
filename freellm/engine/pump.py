"""The streaming pump: one attempt's state machine from upstream chunks to client chunks.

Pure and sans-IO (architecture rule 1): :meth:`StreamPump.feed` takes one canonical upstream chunk and
returns the chunks to send to the client *now*; :meth:`StreamPump.finish` closes the turn. The pump
decides the **commit point** — nothing is returned until the first real payload (non-empty content),
so any failure before it can still be retried on another route invisibly. Role, keep-alive,
reasoning-only and signature-only (``reasoning_signature``) chunks wait in a preamble; tool-call deltas
are accumulated and emitted once, complete; usage is remembered wherever it lands and emitted once,
after our own finish chunk. A reasoning signature is never text: it is passed on (in its chunk) for the
surfaces whose wire has a place for it and accumulated into :attr:`PumpResult.reasoning_signature`.

Failures are raised as :class:`UpstreamError`; whether that means failover (not committed) or an
in-band error frame (committed) is the driver's call, based on :attr:`StreamPump.committed`.

Modes: ``undecided`` (the start: text is held while it could still be a dialect marker, a bare JSON
call head or a ``<think>`` tag), ``passthrough`` (committed: text is forwarded as it comes), ``dialect``
(the text began with tool-call markup: all of it is held for the rescue at the end) and ``hold`` (the
whole answer is held on purpose: a non-stream reply, or a stream whose ``response_format`` is checked
at the end). The tool layer plugs in through hooks (:mod:`freellm.engine.tools`): ``rescue`` parses held
dialect text, ``repair`` fixes arguments, ``validate`` (optional) rejects invalid ones and ``check_text``
(optional) enforces JSON output; all of them run once, in :meth:`StreamPump.finish`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from freellm.core.chunks import Chunk, make_chunk, make_usage_chunk
from freellm.engine.dialects import (
    HEAD_MATCH,
    HEAD_PREFIX,
    bare_json_head,
    contains_marker,
    could_become_marker,
    starts_with_marker,
)
from freellm.engine.tools.think import ThinkSplitter
from freellm.errors import UpstreamError

__all__ = ["PumpResult", "Rescue", "StreamPump", "ToolCall", "new_call_id"]

Mode = Literal["undecided", "passthrough", "dialect", "hold"]


def new_call_id() -> str:
    """A fresh tool-call id (``call_<24 hex>``): unique across turns, so a client's history never
    holds two calls with one id."""
    return f"call_{secrets.token_hex(12)}"


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
    """Outcome of parsing held text for inline tool calls.

    ``calls`` is ``None`` when markup was detected but cannot be parsed (a dead turn; ``reason`` says
    why), ``[]`` when nothing was detected (``clean_text`` is then the text unchanged), else the rescued
    calls with ``clean_text`` the text around them.
    """

    calls: list[ToolCall] | None
    clean_text: str
    reason: str = ""


RescueFn = Callable[[str], Rescue]
RepairFn = Callable[[list[ToolCall]], list[ToolCall]]
ValidateFn = Callable[[list[ToolCall]], str | None]
"""Returns why the calls' arguments are invalid, or None when they are fine."""
CheckTextFn = Callable[[str, str | None], str]
"""``(text, upstream finish_reason) -> text to send``; raises UpstreamError to reject the turn."""


def _no_rescue(text: str) -> Rescue:
    # Without a parser, markup is still recognised (and never leaked): it is a dead turn.
    if contains_marker(text):
        return Rescue(calls=None, clean_text=text, reason="no parser")
    return Rescue(calls=[], clean_text=text)


def _no_repair(calls: list[ToolCall]) -> list[ToolCall]:
    return calls


@dataclass(slots=True)
class PumpResult:
    """Everything the turn produced, for accounting and for folding a non-stream reply."""

    text: str = ""
    reasoning: str = ""
    reasoning_signature: str = ""
    """The upstream's signature over :attr:`reasoning` (Anthropic thinking, Gemini thought parts): the
    one signature the turn's chunks carried, or ``""`` when there was none or the turn carried several
    different ones (or an empty one), since a single reasoning text cannot be replayed under two."""
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
        "_check_text",
        "_chunk_id",
        "_created",
        "_finish",
        "_held",
        "_held_parts",
        "_hold_all",
        "_hold_limit",
        "_model",
        "_parts",
        "_preamble",
        "_reasoning",
        "_repair",
        "_rescue",
        "_result_calls",
        "_resumed",
        "_signature",
        "_text_len",
        "_think",
        "_tool_names",
        "_upstream_model",
        "_validate",
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
        validate: ValidateFn | None = None,
        check_text: CheckTextFn | None = None,
        tool_names: Collection[str] = (),
        hold_all: bool = False,
        think_tags: bool = True,
    ) -> None:
        """``tool_names`` (the declared tools) enables bare-JSON call detection in the stream;
        ``hold_all`` holds the whole answer until :meth:`finish` (non-stream replies, checked JSON
        streams); ``think_tags`` moves a leading ``<think>…</think>`` block to reasoning."""
        self._model = model
        self._wants_tools = wants_tools
        self._hold_limit = hold_limit
        self._rescue = rescue
        self._repair = repair
        self._validate = validate
        self._check_text = check_text
        self._tool_names = tool_names if wants_tools else ()
        self._hold_all = hold_all
        self._think: ThinkSplitter | None = ThinkSplitter() if think_tags else None
        self.mode: Mode = "undecided"
        self.committed = False
        self.first_token = False
        """Set once any content or reasoning arrived (TTFB counts reasoning)."""
        self.usage: dict[str, Any] | None = None
        self._held = ""  # undecided text (a few characters)
        self._held_parts: list[str] = []  # dialect / hold text, joined once at the end
        self._parts: list[str] = []  # text already sent (passthrough)
        self._text_len = 0
        self._reasoning: list[str] = []
        self._signature: str | None = None  # None: none seen yet; "" once unusable
        self._preamble: list[Chunk] = []
        self._acc: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self._finish: str | None = None
        self._chunk_id = ""
        self._created = 0
        self._upstream_model: str | None = None
        self._result_calls: list[ToolCall] = []
        self._resumed = False

    def resume(self) -> None:
        """Start committed, passing text through: this attempt continues an answer the client already
        has the beginning of (:mod:`freellm.engine.continuation`), so nothing is held and an attempt
        that adds nothing more is a complete turn, not an empty one."""
        self.mode = "passthrough"
        self.committed = True
        self._resumed = True
        self._think = None

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
        signature = delta.get("reasoning_signature")
        if isinstance(signature, str):
            # Not a token: it never commits the stream nor sets first_token by itself.
            self._note_signature(signature)
        else:
            signature = None
        content = delta.get("content")
        if content and not isinstance(content, str):
            content = _flatten_content(content)
            delta["content"] = content
        if content and self._think is not None:
            content = self._split_think(chunk, delta, content)
        if not content:
            if reasoning or signature is not None or "role" in delta:
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
        if mode != "undecided":  # dialect, hold
            self._held_parts.append(content)
            if reasoning or signature is not None or "role" in delta:
                self._keep_rest(chunk, delta)
            return []
        self._held += content
        out = self._decide(chunk, delta)
        if not out and (reasoning or signature is not None or "role" in delta):
            self._keep_rest(chunk, delta)
        return out

    def _note_signature(self, signature: str) -> None:
        """One signature per turn: the first one, unless another (or an empty one) comes after it."""
        if self._signature is None:
            self._signature = signature
        elif signature != self._signature:
            self._signature = ""

    def _keep_rest(self, chunk: Chunk, delta: dict[str, Any]) -> None:
        """The chunk's text is held: its role / reasoning / signature still go out (first) with the
        preamble."""
        del delta["content"]
        self._preamble.append(chunk)

    def _split_think(self, chunk: Chunk, delta: dict[str, Any], content: str) -> str:
        """Run content through the leading-``<think>`` splitter; returns the content to go on with."""
        think = self._think
        assert think is not None
        thought, content = think.feed(content)
        if think.done:
            self._think = None
        self.first_token = True
        if thought:
            self._reasoning.append(thought)
            rdelta: dict[str, Any] = {"reasoning_content": thought}
            if "role" in delta:
                rdelta = {"role": delta.pop("role"), **rdelta}
            self._preamble.append(make_chunk(self._chunk_id, self._created, self._model, rdelta))
        if not content:
            delta.pop("content", None)
        else:
            delta["content"] = content
        return content

    def _decide(self, chunk: Chunk, delta: dict[str, Any]) -> list[Chunk]:
        if self._hold_all:
            self._hold()
            return []
        if self._wants_tools:
            probe = self._held.lstrip()
            if starts_with_marker(probe):
                self._hold("dialect")
                return []
            head = bare_json_head(probe, self._tool_names) if self._tool_names else 0
            if head == HEAD_MATCH:
                self._hold("dialect")
                return []
            if (head == HEAD_PREFIX or could_become_marker(probe)) and len(probe) <= self._hold_limit:
                return []
        self.mode = "passthrough"
        delta["content"] = self._held
        self._parts.append(self._held)
        self._text_len += len(self._held)
        self._held = ""
        return self._commit([chunk])

    def _hold(self, mode: Mode = "hold") -> None:
        self.mode = mode
        self._held_parts.append(self._held)
        self._held = ""

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
        if self._think is not None:
            self._flush_think()
        calls = self._finished_calls()
        held = "".join(self._held_parts) if self._held_parts else self._held
        self._held_parts = []
        if self._wants_tools and held and (self.mode == "dialect" or not calls):
            rescue = self._rescue(held)
            if rescue.calls is None:
                reason = f": {rescue.reason}" if rescue.reason else ""
                raise UpstreamError(f"unparseable inline tool-call dialect{reason}", skip_model=True)
            if rescue.calls:
                calls.extend(rescue.calls)
                held = rescue.clean_text.strip()
        # Repaired calls whose arguments are still not JSON are dropped: no client can execute them.
        calls = [c for c in self._repair(calls) if _is_json(c.arguments)]
        self._held = held
        if not held and not self._text_len and not calls and not self._resumed:
            length = self._finish == "length"
            raise UpstreamError(
                "empty completion" + (" (finish_reason length)" if length else ""),
                skip_bench=length,
            )
        if not self.committed:
            # Checks that can still fail over: nothing of this turn reached the client.
            if calls and self._validate is not None:
                problem = self._validate(calls)
                if problem:
                    raise UpstreamError(
                        f"invalid tool arguments from {self._model} ({problem})", skip_model=True, skip_bench=True
                    )
            if not calls and held and self._check_text is not None:
                held = self._check_text(held, self._finish)
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

    def _flush_think(self) -> None:
        """End of stream inside the think splitter: an unclosed block is reasoning, a bare prefix text."""
        think = self._think
        assert think is not None
        self._think = None
        thought, text = think.finish()
        if thought:
            self._reasoning.append(thought)
            self._preamble.append(
                make_chunk(self._chunk_id, self._created, self._model, {"reasoning_content": thought})
            )
        if text:
            self._held += text

    def _finished_calls(self) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for index in sorted(self._acc):
            call_id, name, args = self._acc[index]
            if not name:
                continue
            calls.append(ToolCall(id=call_id or new_call_id(), name=name, arguments=args or "{}"))
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
            reasoning_signature=self._signature or "",
            tool_calls=calls,
            finish_reason=self._final_reason(calls),
            usage=self.usage,
            chunk_id=self._chunk_id,
            created=self._created,
            upstream_model=self._upstream_model,
        )

    @property
    def model(self) -> str:
        """The model name this pump puts on the client's chunks."""
        return self._model

    @property
    def identity(self) -> tuple[str, int]:
        """The stream's chunk id and creation time (taken from the first upstream chunk)."""
        return self._chunk_id, self._created

    @property
    def sent_text(self) -> str:
        """The text the client has of this attempt (what a continuation must not repeat)."""
        return "".join(self._parts)

    @property
    def can_resume(self) -> bool:
        """Whether another route could continue this attempt's answer: text was being passed through and
        no tool call was on its way (half a call cannot be continued by another model)."""
        return self.mode == "passthrough" and not self._acc

    @property
    def output_chars(self) -> int:
        """Characters produced so far (text + reasoning + tool arguments), for token estimates."""
        args = sum(len(slot[2]) for slot in self._acc.values())
        held = len(self._held) + sum(len(p) for p in self._held_parts)
        return self._text_len + held + sum(len(r) for r in self._reasoning) + args


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
