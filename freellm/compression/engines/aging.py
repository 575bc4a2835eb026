"""aging (aggressive): a plain user or assistant message (string content, no tool calls) followed by at
least max(``live_turns`` + 1, ``condense_after_turns``) later user turns becomes::

    [compressed older turn]
    <its first line, ≤ first_line_chars>
    <≤ max_intent_lines sentences naming an intent: need/want/must/should/decid…/implement/fix/change/because>
    <every error or constraint line>
    kept: <every protected span not already in the lines above>

if that is shorter. (Intent is picked by sentence, so a one-line paragraph does not count as one
intent; error and constraint lines are kept whole because the gate requires them whole.)"""

from __future__ import annotations

import bisect
import re

from pydantic import Field

from freellm.compression.engines import EngineParams
from freellm.compression.protect import (
    FILE_RE,
    HUNK_RE,
    INLINE_CODE_RE,
    JSON_KEY_RE,
    KV_RE,
    NUMBER_RE,
    PATH_RE,
    STACK_RE,
    URL_RE,
    fence_ranges,
    is_must_keep,
    numbers_in,
)
from freellm.compression.types import EngineContext, EngineResult, Message, Slots, content_str, with_content

__all__ = ["HEADER", "ID", "LOSSY", "Params", "condense", "run"]

ID = "aging"
LOSSY = True
HEADER = "[compressed older turn]"

INTENT_RE = re.compile(r"\b(?:need|want|must|should|decid\w*|implement\w*|fix\w*|change\w*|because)\b", re.I)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
_SPAN_PATTERNS = (URL_RE, PATH_RE, FILE_RE, INLINE_CODE_RE, KV_RE, JSON_KEY_RE, HUNK_RE)


class Params(EngineParams):
    live_turns: int = Field(default=3, ge=0)
    condense_after_turns: int = Field(default=8, ge=1)
    first_line_chars: int = Field(default=240, ge=1)
    max_intent_lines: int = Field(default=4, ge=0)


def _spans_in_order(text: str) -> list[tuple[int, str, bool]]:
    found: list[tuple[int, str, bool]] = [(a, text[a:b], False) for a, b in fence_ranges(text)]
    for pat in _SPAN_PATTERNS:
        found.extend((m.start(), m.group(0), False) for m in pat.finditer(text))
    found.extend((m.start(), m.group(0).strip(), False) for m in STACK_RE.finditer(text))
    found.extend((m.start(1), m.group(1), True) for m in NUMBER_RE.finditer(text))
    found.sort(key=lambda x: x[0])
    return found


def condense(text: str, params: Params) -> str:
    lines = text.split("\n")
    first_at = next((j for j, line in enumerate(lines) if line.strip()), None)
    if first_at is None:
        return text
    first = lines[first_at].strip()
    if not is_must_keep(first, instructions=True):
        first = first[: params.first_line_chars]
    body = [first]
    intents = 0
    for line in lines[first_at + 1 :]:
        s = line.strip()
        if not s:
            continue
        if is_must_keep(s, instructions=True):
            body.append(s)
            continue
        if intents >= params.max_intent_lines or not INTENT_RE.search(s):
            continue
        picked: list[str] = []
        for sentence in _SENTENCE_RE.split(s):
            if intents < params.max_intent_lines and INTENT_RE.search(sentence):
                picked.append(sentence)
                intents += 1
        if picked:
            body.append(" ".join(picked))
    kept_text = "\n".join(body)
    have_numbers = numbers_in(kept_text)
    extra: list[str] = []
    seen: set[str] = set()
    for _, span, is_number in _spans_in_order(text):
        if not span or span in seen:
            continue
        seen.add(span)
        if is_number:
            if span in have_numbers:
                continue
            have_numbers.add(span)
        elif span in kept_text or any(span in x for x in extra):
            continue
        extra.append(span)
    if extra:
        body.append("kept: " + " ".join(extra))
    return HEADER + "\n" + "\n".join(body)


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    out: list[Message | None] = list(messages)
    users = [i for i, m in enumerate(messages) if m is not None and m.get("role") == "user"]
    threshold = max(params.live_turns + 1, params.condense_after_turns)
    if len(users) < threshold:
        return EngineResult(out)
    for i, m in enumerate(messages):
        text = content_str(m)
        if m is None or text is None or i in ctx.locked or m.get("role") not in ("user", "assistant"):
            continue
        if m.get("tool_calls") or text.startswith(HEADER):
            continue
        later = len(users) - bisect.bisect_right(users, i)
        if later < threshold:
            continue
        new = condense(text, params)
        if len(new) < len(text):
            out[i] = with_content(m, new)
    return EngineResult(out)
