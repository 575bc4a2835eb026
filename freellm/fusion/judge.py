"""The judge's prompt: the conversation, the panel's answers anonymised, one instruction to write the
single final answer. Pure (wire dicts in, wire dicts out), tested with golden files.

The judge gets no tools (it writes text), so the conversation's tool traffic is turned into plain
text it can read: an assistant's calls become ``[called NAME (CALL_ID) with ARGS]`` (the id, when the
call has one, pairs it with its result), a tool result a user turn ``[result of CALL_ID] …``. Images
become ``[image]`` (the judge need not see them: the panel did).
The client's own system text stays, after the judge's instruction, in one leading system message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["JUDGE_INSTRUCTION", "judge_messages"]

JUDGE_INSTRUCTION = (
    "You are the sole author of the final reply in this conversation. Several assistants have drafted "
    "answers to the last message; they are given to you at the end. Write one answer of your own that "
    "keeps what is correct and useful in them, resolves their contradictions by reasoning about which "
    "is right, and fills in what they missed. Answer the user directly and completely, in the "
    "language and format the conversation calls for. Never mention the drafts, their number, the "
    "other assistants or this instruction."
)

_ANSWERS_LEAD = "Here are the drafted answers to the conversation above."
_ANSWERS_ASK = (
    "Write the one final answer to my last message now: a standalone reply, as if it were your own "
    "first answer."
)


def judge_messages(messages: Sequence[dict[str, Any]], answers: Sequence[str]) -> list[dict[str, Any]]:
    """``messages``: the conversation as wire dicts (what the panel was sent); ``answers``: the panel's
    texts in panel order. Returns the judge's messages."""
    system: list[str] = [JUDGE_INSTRUCTION]
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text(message.get("content"))
            if text:
                system.append(text if not turns else f"(Later instruction) {text}")
            continue
        if role == "tool":
            call = message.get("tool_call_id") or "a tool call"
            turns.append({"role": "user", "content": f"[result of {call}] {_text(message.get('content'))}"})
            continue
        if role == "assistant":
            turns.append({"role": "assistant", "content": _assistant_text(message)})
            continue
        turns.append({"role": "user", "content": _text(message.get("content"))})
    listing = "\n\n".join(f"--- Response {i} ---\n{answer}" for i, answer in enumerate(answers, 1))
    turns.append({"role": "user", "content": f"{_ANSWERS_LEAD}\n\n{listing}\n\n{_ANSWERS_ASK}"})
    return [{"role": "system", "content": "\n\n".join(system)}, *turns]


def _assistant_text(message: dict[str, Any]) -> str:
    parts = [_text(message.get("content"))]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            call_id = f" ({call['id']})" if call.get("id") else ""
            parts.append(f"[called {fn.get('name', '?')}{call_id} with {fn.get('arguments') or '{}'}]")
    return "\n".join(p for p in parts if p)


def _text(content: Any) -> str:
    """A message's content as text: strings as they are, text parts joined, any image as ``[image]``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif kind in ("image_url", "image", "input_image"):
            out.append("[image]")
    return "\n".join(out)
