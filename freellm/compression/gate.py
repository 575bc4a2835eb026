"""The fail-open fidelity gate: an engine's output is kept only if it is smaller and loses nothing that
matters; otherwise the request goes on as it was before that engine.

Verdicts, in order: ``exception`` (the engine raised; decided by the compressor), ``unchanged`` (no
message differs), ``inflation`` (the rewritten messages are not smaller), ``fidelity`` (a requirement
below fails), else ``applied``.

Requirements, computed over the *rewritten* messages (a removed message counts as rewritten to nothing):

- every **number literal** of the kept signal (see below) still appears as a number literal somewhere in
  the compressed request;
- every **diff hunk header** and every **error line** (plus, in system/user/assistant text, every
  **constraint line**) still appears — of the whole original message, whatever the engine dropped;
- ≥ 95 % of the other protected spans and ≥ 90 % of the JSON keys of the kept signal still appear;
- every ``tool_calls[].id`` and ``tool_call_id`` still appears in the request.

"Appears" means anywhere in the compressed request, so a dedup marker whose numbers live on in the earlier
copy passes. **The kept signal** of a message is its original text minus the lines the engine declares it
dropped under an explicit rule (:attr:`EngineResult.dropped`): toolfilter's drop rules, the interior of a
collapsed run of identical lines, the lines behind a ``[… N lines omitted …]`` marker, and the body of a
read superseded by a later read or write of the same file. Error lines are never droppable: the engines do
not drop them and the gate requires them anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from freellm.compression.protect import Spans, norm_line, spans_of, strip_ansi
from freellm.compression.types import TOOL_ROLES, Message, message_chars, message_text

__all__ = ["JSON_KEY_SHARE", "OTHER_SPAN_SHARE", "SpanCache", "Verdict", "check"]

OTHER_SPAN_SHARE = 0.95
JSON_KEY_SHARE = 0.90


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str
    """``applied`` | ``unchanged`` | ``inflation`` | ``fidelity``."""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason == "applied"


class SpanCache:
    """Per-``compress``-call memo of each text's spans (engines run one after another over mostly the same
    messages, so every text is scanned once)."""

    __slots__ = ("_spans", "_texts")

    def __init__(self) -> None:
        self._spans: dict[tuple[str, bool], Spans] = {}
        self._texts: dict[int, tuple[Message, str]] = {}

    def text(self, m: Message) -> str:
        hit = self._texts.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        t = message_text(m)
        self._texts[id(m)] = (m, t)
        return t

    def spans(self, text: str, *, instructions: bool) -> Spans:
        key = (text, instructions)
        hit = self._spans.get(key)
        if hit is None:
            hit = spans_of(text, instructions=instructions)
            self._spans[key] = hit
        return hit

    def message_spans(self, m: Message) -> Spans:
        return self.spans(self.text(m), instructions=m.get("role") not in TOOL_ROLES)


def _ids(m: Message) -> set[str]:
    """``result:<id>`` for a tool result's ``tool_call_id``, ``call:<id>`` for each of its tool calls (a
    call and its result share the id, and each must survive in its own place)."""
    out: set[str] = set()
    tcid = m.get("tool_call_id")
    if isinstance(tcid, str) and tcid:
        out.add("result:" + tcid)
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
                out.add("call:" + call["id"])
    return out


def _kept_text(text: str, dropped: Sequence[str]) -> str:
    budget = Counter(norm_line(x) for x in dropped)
    kept: list[str] = []
    for line in strip_ansi(text).split("\n"):
        key = line.strip()
        if budget.get(key, 0) > 0:
            budget[key] -= 1
        else:
            kept.append(line)
    return "\n".join(kept)


class _Available:
    """What the compressed request still contains, computed lazily: first the rewritten messages, then the
    unchanged ones, then (for spans and lines) a plain substring search of the whole request."""

    def __init__(self, after: Sequence[Message | None], changed: Sequence[int], cache: SpanCache) -> None:
        self._after = after
        self._changed = set(changed)
        self._cache = cache
        near = [cache.message_spans(m) for i in changed if (m := after[i]) is not None]
        self.numbers: set[str] = set().union(*(s.numbers for s in near))
        self.other: set[str] = set().union(*(s.other for s in near))
        self.keys: set[str] = set().union(*(s.json_keys for s in near))
        self.lines: set[str] = set().union(*(s.errors | s.hunks for s in near))
        self._rest_done = False
        self._joined: str | None = None

    def widen(self) -> None:
        if self._rest_done:
            return
        self._rest_done = True
        for i, m in enumerate(self._after):
            if m is None or i in self._changed:
                continue
            s = self._cache.message_spans(m)
            self.numbers |= s.numbers
            self.other |= s.other
            self.keys |= s.json_keys
            self.lines |= s.errors | s.hunks

    def joined(self) -> str:
        if self._joined is None:
            self._joined = strip_ansi("\n".join(self._cache.text(m) for m in self._after if m is not None))
        return self._joined

    def missing(self, wanted: Iterable[str], have: set[str], *, substring: bool) -> list[str]:
        miss = [w for w in wanted if w not in have]
        if miss:
            self.widen()
            miss = [w for w in miss if w not in have]
        if miss and substring:
            text = self.joined()
            miss = [w for w in miss if w not in text]
        return miss


def check(
    before: Sequence[Message | None],
    after: Sequence[Message | None],
    dropped: Mapping[int, Sequence[str]],
    cache: SpanCache,
) -> Verdict:
    """Judge one engine's output (``after``, same length as ``before``)."""
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a is not b and a != b]
    if not changed:
        return Verdict("unchanged")
    delta = sum(message_chars(after[i]) - message_chars(before[i]) for i in changed)
    if delta >= 0:
        return Verdict("inflation", f"{delta:+d} chars")

    numbers: set[str] = set()
    other: set[str] = set()
    keys: set[str] = set()
    lines: set[str] = set()
    ids: set[str] = set()
    for i in changed:
        m = before[i]
        if m is None:
            continue
        ids |= _ids(m)
        full = cache.message_spans(m)
        lines |= full.errors | full.hunks
        drops = dropped.get(i)
        if drops:
            kept = spans_of(_kept_text(cache.text(m), drops), instructions=m.get("role") not in TOOL_ROLES)
        else:
            kept = full
        numbers |= kept.numbers
        other |= kept.other
        keys |= kept.json_keys

    have = _Available(after, changed, cache)
    miss = have.missing(sorted(numbers), have.numbers, substring=False)
    if miss:
        return Verdict("fidelity", f"number literals lost: {', '.join(miss[:5])}")
    miss = have.missing(sorted(lines), have.lines, substring=True)
    if miss:
        return Verdict("fidelity", f"{len(miss)} error/constraint line(s) or hunk header(s) lost")
    miss = have.missing(sorted(other), have.other, substring=True)
    if other and len(other) - len(miss) < OTHER_SPAN_SHARE * len(other):
        return Verdict("fidelity", f"{len(miss)} of {len(other)} protected spans lost")
    miss = have.missing(sorted(keys), have.keys, substring=True)
    if keys and len(keys) - len(miss) < JSON_KEY_SHARE * len(keys):
        return Verdict("fidelity", f"{len(miss)} of {len(keys)} JSON keys lost")
    if ids:
        left: set[str] = set()
        for m in after:
            if m is not None:
                left |= _ids(m)
        lost = ids - left
        if lost:
            return Verdict("fidelity", f"tool ids lost: {', '.join(sorted(lost)[:5])}")
    return Verdict("applied")
