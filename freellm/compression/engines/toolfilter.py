"""toolfilter (standard): shorten a tool result with the first matching filter rule (custom rules, then
the built-ins of :mod:`freellm.compression.filters.builtin`).

Steps, each on what the previous one left: strip ANSI codes; drop the rule's ``drop_lines`` (never a
must-keep line: an error line or a diff hunk header; never a ``keep_lines`` line); collapse runs of ≥ min
identical lines to first, ``[… N identical lines omitted …]``, last; over max(10, ``max_lines``) lines keep
the head and tail (intensity ``minimal`` 50/35, ``standard`` 30/20, ``aggressive`` 15/15) plus every
must-keep line between, each gap becoming ``[… N lines omitted …]``; then drop lines from the centre
outwards (never a must-keep line) until the text fits ``max_chars`` (the rule's, else the tunable). The
result is kept only if shorter. Every line removed is declared dropped to the gate.

Detection reads the tool name (from the matching ``tool_calls`` entry or the message's ``name``), the
shell command when the call has one, and the first 8000 and last 4000 characters of the output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from freellm.compression.engines import EngineParams
from freellm.compression.engines.read_lifecycle import tool_name
from freellm.compression.filters.model import CompiledRule, HeadTail
from freellm.compression.protect import is_must_keep, strip_ansi
from freellm.compression.types import (
    TOOL_ROLES,
    EngineContext,
    EngineResult,
    Message,
    Slots,
    content_str,
    with_content,
)

__all__ = ["HEAD_TAIL", "ID", "LOSSY", "Params", "apply_rule", "run"]

ID = "toolfilter"
LOSSY = True

HEAD_TAIL: dict[str, tuple[int, int]] = {"minimal": (50, 35), "standard": (30, 20), "aggressive": (15, 15)}
_WINDOW_HEAD = 8000
_WINDOW_TAIL = 4000


class Params(EngineParams):
    max_lines: int = Field(default=120, ge=1)
    max_chars: int = Field(default=12000, ge=1)
    intensity: Literal["minimal", "standard", "aggressive"] = "standard"


def _gap(n: int) -> str:
    return f"[… {n} lines omitted …]"


class _Lines:
    """The working output: lines, which of them must stay, which are markers."""

    __slots__ = ("dropped", "items", "keep", "marker")

    def __init__(self) -> None:
        self.items: list[str] = []
        self.keep: list[bool] = []
        self.marker: list[bool] = []
        self.dropped: list[str] = []

    def add(self, line: str, *, keep: bool, marker: bool = False) -> None:
        self.items.append(line)
        self.keep.append(keep)
        self.marker.append(marker)

    def rebuild(self, remove: set[int]) -> _Lines:
        """A copy without the ``remove`` indices, each run of removed lines replaced by one gap marker."""
        out = _Lines()
        out.dropped = self.dropped
        run = 0
        for j, line in enumerate(self.items):
            if j in remove:
                if not self.marker[j]:
                    out.dropped.append(line)
                run += 1
                continue
            if run:
                out.add(_gap(run), keep=True, marker=True)
                run = 0
            out.add(line, keep=self.keep[j], marker=self.marker[j])
        if run:
            out.add(_gap(run), keep=True, marker=True)
        return out


def apply_rule(text: str, rule: CompiledRule, params: Params) -> tuple[str, list[str]]:
    """The filtered text and the original lines dropped."""
    r = rule.rule
    if r.strip_ansi:
        text = strip_ansi(text)
    work = _Lines()
    keeps = rule.keeps
    for line in text.split("\n"):
        kept = any(p.search(line) for p in keeps) if keeps else False
        if not kept and rule.drops:
            hit = any(p.search(line) and not (u is not None and u.search(line)) for p, u in rule.drops)
            if hit and not is_must_keep(line, instructions=False):
                work.dropped.append(line)
                continue
        work.add(line, keep=kept)
    if r.collapse_runs is not None:
        work = _collapse(work, r.collapse_runs.min)
    if r.head_tail is not False:
        head, tail = (r.head_tail.head, r.head_tail.tail) if isinstance(r.head_tail, HeadTail) else HEAD_TAIL[params.intensity]
        limit = max(10, params.max_lines)
        if len(work.items) > limit and len(work.items) > head + tail:
            middle = range(head, len(work.items) - tail)
            remove = {j for j in middle if not work.keep[j] and not _must(work, j)}
            if remove:
                work = work.rebuild(remove)
    max_chars = r.max_chars if r.max_chars is not None else params.max_chars
    if max_chars:
        work = _fit(work, max_chars)
    return "\n".join(work.items), work.dropped


def _must(work: _Lines, j: int) -> bool:
    if work.marker[j]:
        return True
    if is_must_keep(work.items[j], instructions=False):
        work.keep[j] = True
        return True
    return False


def _collapse(work: _Lines, min_run: int) -> _Lines:
    items = work.items
    out = _Lines()
    out.dropped = work.dropped
    j = 0
    n = len(items)
    while j < n:
        k = j + 1
        while k < n and items[k] == items[j] and not work.marker[k]:
            k += 1
        run = k - j
        if run >= min_run and items[j].strip() and not work.marker[j]:
            out.add(items[j], keep=work.keep[j])
            out.add(f"[… {run - 2} identical lines omitted …]", keep=True, marker=True)
            out.add(items[k - 1], keep=work.keep[j])
            out.dropped.extend(items[j + 1 : k - 1])
        else:
            for x in range(j, k):
                out.add(items[x], keep=work.keep[x], marker=work.marker[x])
        j = k
    return out


def _fit(work: _Lines, max_chars: int) -> _Lines:
    total = sum(len(x) for x in work.items) + max(0, len(work.items) - 1)
    if total <= max_chars:
        return work
    n = len(work.items)
    centre = (n - 1) / 2
    order = sorted(range(n), key=lambda j: (abs(j - centre), j))
    remove: set[int] = set()
    for j in order:
        if total <= max_chars:
            break
        if work.keep[j] or _must(work, j):
            continue
        remove.add(j)
        total -= len(work.items[j]) + 1
    return work.rebuild(remove) if remove else work


def _command(args: object) -> str | None:
    if isinstance(args, dict):
        c = args.get("command", args.get("cmd"))
        if isinstance(c, list):
            return " ".join(str(x) for x in c)
        if isinstance(c, str):
            return c
    return None


def _pick(rules: Sequence[CompiledRule], name: str, command: str | None, text: str) -> CompiledRule | None:
    window = text if len(text) <= _WINDOW_HEAD + _WINDOW_TAIL else text[:_WINDOW_HEAD] + "\n" + text[-_WINDOW_TAIL:]
    json_state: list[bool] = []

    def is_json() -> bool:
        if not json_state:
            s = text.strip()
            ok = len(s) >= 2 and s[0] in "[{" and s[-1] in "]}"
            if ok:
                try:
                    json.loads(s)
                except ValueError:
                    ok = False
            json_state.append(ok)
        return json_state[0]

    return next((r for r in rules if r.matches(name, command, window, is_json)), None)


def run(messages: Slots, ctx: EngineContext, params: Params) -> EngineResult:
    out: list[Message | None] = list(messages)
    dropped: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        text = content_str(m)
        if m is None or text is None or not text or i in ctx.locked or m.get("role") not in TOOL_ROLES:
            continue
        call = ctx.calls.get(m.get("tool_call_id") or "")
        name = (call.name if call else m.get("name")) or ""
        command = _command(call.args) if call else None
        rule = _pick(ctx.filters, tool_name(str(name)), command, text)
        if rule is None:
            continue
        new, lost = apply_rule(text, rule, params)
        if len(new) < len(text):
            out[i] = with_content(m, new)
            dropped[i] = lost
    return EngineResult(out, dropped)
