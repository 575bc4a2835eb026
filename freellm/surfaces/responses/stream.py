"""The Responses stream renderer: canonical chunk batches in, Responses SSE events out.

A per-request, stateful and pure translator (no I/O, no clock, ids from an injected factory), tested
with golden fixtures. Frames are ``event: <type>\\ndata: <json>\\n\\n``; every payload carries its
``type`` and a ``sequence_number`` counting from 0. There is no ``[DONE]``.

The order (spec/surfaces.md §1):

1. on the first batch (the commit point): ``response.created``, ``response.in_progress``;
2. reasoning opens a ``reasoning`` item (``reasoning_text`` part, ``response.reasoning_text.delta``…);
   text opens a ``message`` item (``response.output_item.added``, ``response.content_part.added`` with
   ``text: ""``, then ``response.output_text.delta``…). Switching kind closes the open item with its done
   triple (``…text.done``, ``response.content_part.done``, ``response.output_item.done``);
3. a tool call closes the open item and opens a ``function_call`` item (``arguments: ""``), its argument
   fragments as ``response.function_call_arguments.delta``;
4. at the end: the open item's done triple, each call's ``response.function_call_arguments.done`` and
   ``response.output_item.done``, then ``response.completed`` (``response.incomplete`` when the output
   was cut by the token limit) whose object carries the very items and ids that were streamed.

After an error past the commit point, :meth:`stream_error` emits ``response.failed`` (the object with
``status: failed``, its ``error`` and the items so far) and the stream ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from freellm.core.chunks import MARKER_KEY, Chunk, read_chunk
from freellm.core.tokens import estimate_text_tokens
from freellm.surfaces.responses.ids import IdFactory, random_id
from freellm.surfaces.responses.objects import (
    ItemStatus,
    ResponseShell,
    end_status,
    function_call_item,
    message_item,
    reasoning_item,
    usage_object,
)

__all__ = ["ResponsesStreamRenderer"]

ItemKind = Literal["message", "reasoning", "function_call"]


@dataclass(slots=True)
class _Item:
    kind: ItemKind
    id: str
    index: int
    parts: list[str] = field(default_factory=list)
    """Text (message), reasoning text (reasoning) or argument fragments (function_call)."""
    call_id: str = ""
    name: str = ""
    status: ItemStatus = "in_progress"

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def snapshot(self) -> dict[str, Any]:
        """The item as it stands (``status`` included)."""
        if self.kind == "message":
            return message_item(self.id, self.text, self.status)
        if self.kind == "reasoning":
            return reasoning_item(self.id, self.text, self.status)
        return function_call_item(self.id, self.call_id, self.name, self.text, self.status)


class ResponsesStreamRenderer:
    """Implements the :class:`~freellm.server.sinks.StreamRenderer` protocol for ``/v1/responses``.

    ``final`` is the response object of the terminal event once it was emitted; ``on_final`` (optional)
    is called with it at that moment, before the bytes reach the client.
    """

    content_type = "text/event-stream"

    def __init__(
        self,
        shell: ResponseShell,
        *,
        ids: IdFactory = random_id,
        input_tokens_estimate: int = 0,
        on_final: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._shell = shell
        self._ids = ids
        self._input_estimate = input_tokens_estimate
        self._on_final = on_final
        self._seq = 0
        self._started = False
        self._items: list[_Item] = []
        self._open: _Item | None = None
        """The open message or reasoning item (function calls stay open until the end)."""
        self._calls: dict[int, _Item] = {}
        """Tool-call delta index → its item."""
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._continued: Any = None
        """The finish chunk's continuation marker (stream.continue_on_failure), for the final object."""
        self._out: list[bytes] = []
        self.final: dict[str, Any] | None = None

    # ---- StreamRenderer ---------------------------------------------------------------------------

    def chunks(self, chunks: list[Chunk]) -> bytes:
        if self.final is not None:
            return b""
        self._start()
        for chunk in chunks:
            self._chunk(chunk)
        return self._flush()

    def stream_error(self, provider: str, message: str) -> bytes:
        if self.final is not None:
            return self._flush()
        self._start()
        error = {
            "code": "server_error",
            "message": f"Provider error ({provider}): stream interrupted: {message}",
            "type": "stream_error",
        }
        for item in self._items:
            if item.status == "in_progress":
                item.status = "incomplete"  # cut short: no done events follow
        self._open = None
        output = [item.snapshot() for item in self._items]
        usage = self._usage_object() if self._usage is not None else None
        response = self._shell.build("failed", output, usage=usage, error=error)
        self._finalise("response.failed", response)
        return self._flush()

    def done(self) -> bytes:
        if self.final is not None:
            return self._flush()
        self._start()
        status, reason = end_status(self._finish)
        self._close_open("incomplete" if status == "incomplete" else "completed")
        for item in self._items:
            if item.kind == "function_call" and item.status == "in_progress":
                item.status = "completed"
                self._emit(
                    "response.function_call_arguments.done",
                    item_id=item.id,
                    output_index=item.index,
                    arguments=item.text,
                )
                self._emit("response.output_item.done", output_index=item.index, item=item.snapshot())
        output = [item.snapshot() for item in self._items]
        response = self._shell.build(status, output, usage=self._usage_object(), incomplete_reason=reason)
        if self._continued is not None:
            response[MARKER_KEY] = self._continued
        self._finalise("response.completed" if status == "completed" else "response.incomplete", response)
        return self._flush()

    # ---- fusion progress (freellm.fusion) ------------------------------------------------------------

    def opening(self) -> bytes:
        """A fusion stream opens at once: ``response.created`` and ``response.in_progress``."""
        self._start()
        return self._flush()

    def progress(self, event: dict[str, Any]) -> bytes:
        """One ``response.fusion`` event (``_fusion``: the panel or judge event). Always after
        ``response.created``: the openai SDK's ``responses.stream()`` raises on anything before it and
        passes unknown event types through after it."""
        self._start()
        self._emit("response.fusion", _fusion=event)
        return self._flush()

    # ---- chunk handling ---------------------------------------------------------------------------

    def _chunk(self, chunk: Chunk) -> None:
        delta, finish, usage = read_chunk(chunk)
        if usage:
            self._usage = usage
        if delta is not None:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._delta("reasoning", reasoning)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._delta("message", content)
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                for pos, call in enumerate(calls):
                    if isinstance(call, dict):
                        self._tool_call(pos, call)
        if finish is not None:
            self._finish = finish
            self._continued = chunk.get(MARKER_KEY)

    def _delta(self, kind: Literal["message", "reasoning"], text: str) -> None:
        item = self._open
        if item is None or item.kind != kind:
            self._close_open("completed")
            item = self._open_item(kind)
        item.parts.append(text)
        event = "response.output_text.delta" if kind == "message" else "response.reasoning_text.delta"
        extra: dict[str, Any] = {"logprobs": []} if kind == "message" else {}
        self._emit(event, item_id=item.id, output_index=item.index, content_index=0, delta=text, **extra)

    def _open_item(self, kind: Literal["message", "reasoning"]) -> _Item:
        prefix = "msg" if kind == "message" else "rs"
        item = _Item(kind=kind, id=self._ids(prefix), index=len(self._items))
        self._items.append(item)
        self._open = item
        shell = message_item(item.id, None, "in_progress") if kind == "message" else reasoning_item(item.id, None, "in_progress")
        self._emit("response.output_item.added", output_index=item.index, item=shell)
        self._emit(
            "response.content_part.added",
            item_id=item.id,
            output_index=item.index,
            content_index=0,
            part=_part(kind, ""),
        )
        return item

    def _close_open(self, status: ItemStatus) -> None:
        item = self._open
        if item is None:
            return
        self._open = None
        item.status = status
        text = item.text
        if item.kind == "message":
            self._emit(
                "response.output_text.done",
                item_id=item.id,
                output_index=item.index,
                content_index=0,
                text=text,
                logprobs=[],
            )
        else:
            self._emit(
                "response.reasoning_text.done", item_id=item.id, output_index=item.index, content_index=0, text=text
            )
        self._emit(
            "response.content_part.done",
            item_id=item.id,
            output_index=item.index,
            content_index=0,
            part=_part(item.kind, text),
        )
        self._emit("response.output_item.done", output_index=item.index, item=item.snapshot())

    def _tool_call(self, pos: int, call: dict[str, Any]) -> None:
        index = call.get("index", pos)
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        item = self._calls.get(index) if isinstance(index, int) else None
        if item is None:
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                return  # a fragment of a call we never saw open: nothing to attach it to
            self._close_open("completed")
            call_id = call.get("id")
            item = _Item(
                kind="function_call",
                id=self._ids("fc"),
                index=len(self._items),
                call_id=call_id if isinstance(call_id, str) and call_id else f"call_{len(self._items)}",
                name=name,
            )
            self._items.append(item)
            if isinstance(index, int):
                self._calls[index] = item
            added = function_call_item(item.id, item.call_id, item.name, "", "in_progress")
            self._emit("response.output_item.added", output_index=item.index, item=added)
        arguments = fn.get("arguments")
        if isinstance(arguments, str) and arguments:
            item.parts.append(arguments)
            self._emit(
                "response.function_call_arguments.delta", item_id=item.id, output_index=item.index, delta=arguments
            )

    # ---- framing ----------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        shell = self._shell.build("in_progress", [])
        self._emit("response.created", response=shell)
        self._emit("response.in_progress", response=shell)

    def _finalise(self, event: str, response: dict[str, Any]) -> None:
        self.final = response
        if self._on_final is not None:
            self._on_final(response)
        self._emit(event, response=response)

    def _emit(self, event: str, **fields: Any) -> None:
        payload = {"type": event, "sequence_number": self._seq, **fields}
        self._seq += 1
        self._out.append(b"event: " + event.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n")

    def _flush(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    def _usage_object(self) -> dict[str, Any]:
        chars = sum(len(item.text) for item in self._items)
        reasoning = sum(len(item.text) for item in self._items if item.kind == "reasoning")
        return usage_object(
            self._usage,
            input_estimate=self._input_estimate,
            output_estimate=estimate_text_tokens(chars),
            reasoning_chars=reasoning,
        )


def _part(kind: ItemKind, text: str) -> dict[str, Any]:
    if kind == "message":
        return {"type": "output_text", "text": text, "annotations": []}
    return {"type": "reasoning_text", "text": text}
