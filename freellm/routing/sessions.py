"""Conversations that stay on their model (spec/core.md §8): session keys, the remembered route, context
handoff and reasoning memory.

Pure functions do the work — :func:`session_key`, :func:`handoff_message`, :func:`with_handoff`,
:func:`with_reasoning`, :func:`next_memory` — and :class:`SessionMemory` keeps one document per session
in the ``StateStore`` (so a shared store can serve several replicas):

``{"route": "<provider/model that last served>", "turns": [{"role", "content"}, …],
"reasoning": {"route", "text", "signature", "answer", "tool_call_ids"} | null}``
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from freellm.config import SessionsConfig
from freellm.core.messages import Message
from freellm.store.base import StateStore

__all__ = [
    "HANDOFF_MARKER",
    "SessionMemory",
    "first_user_text",
    "handoff_message",
    "has_assistant_turn",
    "next_memory",
    "session_key",
    "valid_session_header",
    "with_handoff",
    "with_reasoning",
]

HANDOFF_MARKER = "FreeLLM context handoff:"
_HEADER_MAX = 256
_TRUNCATED = "\n…[truncated]"


# ---- keys ---------------------------------------------------------------------------------------------


def valid_session_header(value: str | None) -> str | None:
    """``X-Session-Id`` when usable: 1-256 printable characters (anything else is ignored)."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _HEADER_MAX or not value.isprintable():
        return None
    return value


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def first_user_text(messages: Sequence[Message]) -> str:
    for m in messages:
        if m.role == "user":
            return _text(m.content)
    return ""


def has_assistant_turn(messages: Sequence[Message]) -> bool:
    return any(m.role == "assistant" for m in messages)


def session_key(*, scope: str, model: str, header: str | None, messages: Sequence[Message]) -> str | None:
    """The session of a request: ``X-Session-Id``, else the first user text — both scoped by who asks
    (client key or profile) and the model asked for, so two users never share a session. None when
    there is neither a usable header nor any user text."""
    hdr = valid_session_header(header)
    if hdr is not None:
        basis = "hdr\x1f" + hdr
    else:
        text = first_user_text(messages)
        if not text:
            return None
        basis = "txt\x1f" + text
    return hashlib.sha256(f"{scope}\x1f{model}\x1f{basis}".encode()).hexdigest()


# ---- context handoff --------------------------------------------------------------------------------------


def handoff_message(previous: str, new: str, turns: Sequence[dict[str, str]], max_chars: int) -> str:
    """The system message that tells a new model it takes over a conversation."""
    lines = [f"{'User' if t['role'] == 'user' else 'Assistant'}: {t['content']}" for t in turns]
    summary = "\n".join(lines)
    if len(summary) > max_chars:
        summary = summary[:max_chars] + _TRUNCATED
    return (
        f"{HANDOFF_MARKER} {previous} → {new}\n"
        f"This conversation was being answered by {previous}; you ({new}) are taking it over. Continue it "
        "from where it stands: do not restart, introduce yourself or re-ask what was already answered, keep "
        "using the tool results already in the conversation, and treat the latest user message as the top "
        "priority.\n"
        f"Recent session summary:\n{summary}"
    )


def with_handoff(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]] | None:
    """``messages`` with the handoff system message after the leading system messages; None when a
    handoff is already there (never twice)."""
    for m in messages:
        if m.get("role") == "system" and HANDOFF_MARKER in _text(m.get("content")):
            return None
    at = 0
    while at < len(messages) and messages[at].get("role") == "system":
        at += 1
    return [*messages[:at], {"role": "system", "content": text}, *messages[at:]]


# ---- reasoning memory -------------------------------------------------------------------------------------


def with_reasoning(messages: list[dict[str, Any]], memory: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Put remembered reasoning back on the newest assistant turn when it lacks reasoning and is the
    answer it belonged to; None when nothing applies. Reasoning the client sent is kept as sent."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") != "assistant":
            continue
        if m.get("reasoning_content"):
            return None
        ids = [c.get("id") for c in m.get("tool_calls") or () if isinstance(c, dict)]
        if _text(m.get("content")).strip() != str(memory.get("answer", "")).strip():
            return None
        if ids != list(memory.get("tool_call_ids") or []):
            return None
        restored = {**m, "reasoning_content": memory["text"]}
        if memory.get("signature"):
            restored["reasoning_signature"] = memory["signature"]
        return [*messages[:i], restored, *messages[i + 1 :]]
    return None


# ---- what a success leaves behind ---------------------------------------------------------------------------


def next_memory(
    *,
    route: str,
    messages: Sequence[Message],
    answer: str,
    tool_call_ids: list[str],
    reasoning: str,
    signature: str,
    cfg: SessionsConfig,
) -> dict[str, Any]:
    """The session document after a successful turn served by ``route`` (what came before is replaced:
    older reasoning no longer belongs to the newest answer)."""
    turns: list[dict[str, str]] = []
    if cfg.context_handoff != "off":  # only a handoff reads the turns: keep none otherwise
        cut, keep = cfg.handoff_message_chars, cfg.handoff_messages
        if answer:
            turns.append({"role": "assistant", "content": _clip(answer, cut)})
        for m in reversed(messages):  # newest first, and no further back than needed
            if len(turns) >= keep:
                break
            text = _text(m.content) if m.role in ("user", "assistant") else ""
            if text:
                turns.append({"role": m.role, "content": _clip(text, cut)})
        turns.reverse()
    doc: dict[str, Any] = {"route": route, "turns": turns, "reasoning": None}
    if cfg.reasoning_memory and reasoning:
        doc["reasoning"] = {
            "route": route,
            "text": reasoning,
            "signature": signature,
            "answer": answer,
            "tool_call_ids": tool_call_ids,
        }
    return doc


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class SessionMemory:
    """Session documents in the ``StateStore``; TTL from the last success, a bounded map."""

    def __init__(self, cfg: SessionsConfig, store: StateStore) -> None:
        self.cfg = cfg
        self._store = store

    async def get(self, key: str) -> dict[str, Any] | None:
        return await self._store.get_session(key, time.time())

    async def put(self, key: str, doc: dict[str, Any]) -> None:
        await self._store.put_session(key, doc, time.time() + self.cfg.ttl_s, self.cfg.max_sessions)
