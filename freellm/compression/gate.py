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

from freellm.compression.protect import fence_ranges, norm_line, strip_ansi
from freellm.compression.spancache import SpanCache
from freellm.compression.types import TOOL_ROLES, Message, message_chars

__all__ = ["JSON_KEY_SHARE", "OTHER_SPAN_SHARE", "SpanCache", "Verdict", "check"]

OTHER_SPAN_SHARE = 0.95
JSON_KEY_SHARE = 0.90


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str
    """``applied`` | ``unchanged`` | ``inflation`` | ``fidelity``."""
    detail: str = ""
    delta: int = 0
    """How many characters the engine's output changes the request's size by (negative: smaller): the
    gate sums it anyway, so the compressor keeps its running total without measuring every message."""

    @property
    def ok(self) -> bool:
        return self.reason == "applied"


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
        return Verdict("inflation", f"{delta:+d} chars", delta)
    if _nothing_lost(before, after, changed, dropped, cache):
        verdict = _ids_verdict(before, after, changed)
    else:
        verdict = _judge(before, after, changed, dropped, cache)
    return Verdict(verdict.reason, verdict.detail, delta)


def _judge(
    before: Sequence[Message | None],
    after: Sequence[Message | None],
    changed: Sequence[int],
    dropped: Mapping[int, Sequence[str]],
    cache: SpanCache,
) -> Verdict:
    """The requirements of the module docstring, each span set computed in full (and so worded verdicts)."""
    numbers: set[str] = set()
    other: set[str] = set()
    keys: set[str] = set()
    lines: set[str] = set()
    for i in changed:
        m = before[i]
        if m is None:
            continue
        full = cache.message_spans(m)
        lines |= full.errors | full.hunks
        drops = dropped.get(i)
        if drops:
            kept = cache.spans(_kept_text(cache.text(m), drops), instructions=m.get("role") not in TOOL_ROLES)
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
    return _ids_verdict(before, after, changed)


def _ids_verdict(
    before: Sequence[Message | None], after: Sequence[Message | None], changed: Sequence[int]
) -> Verdict:
    ids: set[str] = set()
    for i in changed:
        m = before[i]
        if m is not None:
            ids |= _ids(m)
    if ids:
        left: set[str] = set()
        for m in after:
            if m is not None:
                left |= _ids(m)
        lost = ids - left
        if lost:
            return Verdict("fidelity", f"tool ids lost: {', '.join(sorted(lost)[:5])}")
    return Verdict("applied")


# The quick proof. Most of an engine's output keeps most lines of the messages it rewrites (lite trims
# trailing blanks, dedup's marker points at an earlier copy), so instead of scanning every rewritten text
# for its spans, the gate first tries to show that nothing can be missing, and only judges in full when
# it cannot. It is exact, never a guess: it answers True only when _judge would find no span, number or
# line missing (the tool ids are then checked as usual), because
#
# - every span but a fenced block lies within one line (no pattern crosses a "\n") and starts and ends
#   with a non-space, so it lies within that line stripped; a stripped line present in the compressed
#   request brings its spans along, and "present" is all _judge asks of a span or line (the compressed
#   request's own spans are substrings of it too, so the substring search decides alone);
# - number literals are found line by line (the pattern consumes neither "\n" nor spaces, and a line
#   boundary looks like the text's edge to its lookarounds), so a line whose stripped form is a line of a
#   compressed message has its number literals among that message's;
# - ANSI codes are stripped before spans are found, and an escape sequence may run across lines or
#   messages: any escape character anywhere sends the engine's output to the full judgement.


class _Request:
    """The compressed request as the quick proof sees it: its texts, lazily joined, every line of them
    (stripped), and, per text, its number literals."""

    __slots__ = ("_cache", "_joined", "_lines", "texts")

    def __init__(self, after: Sequence[Message | None], cache: SpanCache) -> None:
        self._cache = cache
        self.texts = [cache.text(m) for m in after if m is not None]
        self._joined: str | None = None
        self._lines: frozenset[str] | None = None

    def lines(self) -> frozenset[str]:
        if self._lines is None:
            self._lines = frozenset().union(*(self._cache.lines(t) for t in self.texts))
        return self._lines

    def contains(self, span: str, own: str | None) -> bool:
        """Whether ``span`` appears anywhere (``own``, the rewritten message's text, is searched first)."""
        if own is not None and span in own:
            return True
        if self._joined is None:
            self._joined = "\n".join(self.texts)
        return span in self._joined

    def has_number(self, number: str, own: str | None) -> bool:
        """Whether ``number`` is a number literal of some message (``own`` first; a message that does not
        even contain it as a substring is not scanned)."""
        numbers = self._cache.numbers
        if own is not None and number in own and number in numbers(own):
            return True
        return any(number in t and number in numbers(t) for t in self.texts)


def _nothing_lost(
    before: Sequence[Message | None],
    after: Sequence[Message | None],
    changed: Sequence[int],
    dropped: Mapping[int, Sequence[str]],
    cache: SpanCache,
) -> bool:
    """True when no requirement but the tool ids can fail (see the comment above); False: not shown."""
    req = _Request(after, cache)
    if any("\x1b" in t for t in req.texts):
        return False
    for i in changed:
        m = before[i]
        if m is None:
            continue
        text = cache.text(m)
        if "\x1b" in text:
            return False
        a = after[i]
        own = cache.text(a) if a is not None else None
        drops = dropped.get(i)
        if not drops and _lines_survive(text, own, req, cache):
            continue
        if not _spans_survive(m, text, own, drops, req, cache):
            return False
    return True


def _lines_survive(text: str, own: str | None, req: _Request, cache: SpanCache) -> bool:
    """Every non-blank line of ``text``, stripped, is a line of the compressed request, and so is every
    fenced block (the one multi-line span) a substring of it."""
    need = cache.lines(text)
    if own is not None:
        need = need - cache.lines(own)
    if need and not need <= req.lines():
        return False
    if "```" in text or "~~~" in text:
        return all(req.contains(text[a:b], own) for a, b in fence_ranges(text))
    return True


def _spans_survive(
    m: Message, text: str, own: str | None, drops: Sequence[str] | None, req: _Request, cache: SpanCache
) -> bool:
    """Every required span of one rewritten message, found and looked up one by one."""
    instructions = m.get("role") not in TOOL_ROLES
    full = cache.spans(text, instructions=instructions)
    kept = cache.spans(_kept_text(text, drops), instructions=instructions) if drops else full
    if not all(req.has_number(n, own) for n in kept.numbers):
        return False
    return all(
        req.contains(s, own) for group in (full.errors, full.hunks, kept.other, kept.json_keys) for s in group
    )
