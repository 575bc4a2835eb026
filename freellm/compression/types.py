"""The shapes every engine shares: a message, the per-call context an engine reads, and what it returns.

Engines work on a list of messages *with stable indices*: a removed message becomes ``None`` rather than
shifting the rest, so the frozen and cache-prefix index sets and the gate's before/after comparison stay
valid across the whole pipeline. The compressor drops the ``None`` entries at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from freellm.compression.filters.model import CompiledRule

__all__ = [
    "TOOL_ROLES",
    "EngineContext",
    "EngineResult",
    "Message",
    "Slots",
    "ToolCall",
    "content_str",
    "message_chars",
    "message_text",
    "total_chars",
    "with_content",
]

Message = dict[str, Any]
Slots = Sequence[Message | None]
"""The working list: one slot per original message, ``None`` once removed."""

TOOL_ROLES = frozenset({"tool", "function"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One ``tool_calls`` entry of an assistant message, with its arguments parsed when they are JSON."""

    id: str
    name: str
    arguments: str
    args: Mapping[str, Any] | None
    message_index: int
    position: int


@dataclass(frozen=True, slots=True)
class EngineContext:
    """What an engine may read besides the messages. Built once per ``compress`` call (``locked`` per engine)."""

    mode: str
    locked: frozenset[int]
    """Indices this engine must not rewrite (frozen system prompts; the cache-control prefix for lossy engines)."""
    target_chars: int | None
    calls: Mapping[str, ToolCall]
    """tool_call id → the call (from every assistant message)."""
    filters: Sequence[CompiledRule] = ()
    """toolfilter's rules, custom first, then the built-ins."""


@dataclass(frozen=True, slots=True)
class EngineResult:
    """An engine's output: the new slots (unchanged messages are the same objects) and, per rewritten
    message index, the original lines it dropped *under an explicit rule* (the gate does not require
    their numbers and spans to survive; error lines stay required whatever an engine claims)."""

    messages: list[Message | None]
    dropped: Mapping[int, Sequence[str]] = field(default_factory=dict)


def content_str(m: Message | None) -> str | None:
    """The message's content when it is a string (the only form engines rewrite), else ``None``."""
    if m is None:
        return None
    c = m.get("content")
    return c if isinstance(c, str) else None


def with_content(m: Message, content: str) -> Message:
    """A shallow copy of ``m`` with new string content; every other field kept as is."""
    out = dict(m)
    out["content"] = content
    return out


def _text_pieces(m: Message) -> list[str]:
    """Every piece of text a message carries: content or text parts, tool-call names and arguments."""
    c = m.get("content")
    pieces: list[str] = []
    if isinstance(c, str):
        pieces.append(c)
    elif isinstance(c, list):
        for part in c:
            if isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str):
                    pieces.append(t)
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                for key in ("name", "arguments"):
                    v = fn.get(key)
                    if isinstance(v, str):
                        pieces.append(v)
    return pieces


def message_text(m: Message) -> str:
    """Every piece of text a message carries, joined with newlines."""
    pieces = _text_pieces(m)
    return pieces[0] if len(pieces) == 1 else "\n".join(pieces)


def message_chars(m: Message | None) -> int:
    """The characters a message contributes to the size of the request (text, tool names and arguments)."""
    if m is None:
        return 0
    c = m.get("content")
    if isinstance(c, str) and not m.get("tool_calls"):
        return len(c)  # the common case, without building a list
    return sum(len(p) for p in _text_pieces(m))


def total_chars(messages: Slots) -> int:
    return sum(message_chars(m) for m in messages)
