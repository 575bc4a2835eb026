"""Builders and invariant checks shared by the compression tests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from freellm.compression import Compressor
from freellm.compression.engines.read_lifecycle import classify
from freellm.compression.protect import error_line_set, numbers_in, strip_ansi
from freellm.compression.types import ToolCall
from freellm.config import CompressionConfig

__all__ = [
    "assert_invariants",
    "call",
    "make_compressor",
    "request_numbers",
    "result",
    "signal_numbers",
]

Msg = dict[str, Any]


def make_compressor(
    mode: str = "aggressive",
    *,
    only: str | None = None,
    engines: dict[str, dict[str, Any]] | None = None,
    filters_dir: Path | None = None,
    **cfg: Any,
) -> Compressor:
    """A compressor configured with ``mode``; ``only``: every other engine disabled."""
    from freellm.compression import ENGINE_IDS

    eng: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (engines or {}).items()}
    if only is not None:
        for e in ENGINE_IDS:
            if e != only:
                eng.setdefault(e, {})["enabled"] = False
    config = CompressionConfig.model_validate({"mode": mode, "engines": eng, **cfg})
    return Compressor(config, filters_dir=filters_dir)


def call(cid: str, name: str, **args: Any) -> Msg:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def result(cid: str, content: str) -> Msg:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def _text(m: Msg) -> str:
    c = m.get("content")
    parts: list[str] = []
    if isinstance(c, str):
        parts.append(c)
    elif isinstance(c, list):
        parts.extend(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    for tc in m.get("tool_calls") or []:
        parts.append(tc["function"]["name"])
        parts.append(tc["function"]["arguments"])
    return strip_ansi("\n".join(parts))


def request_numbers(messages: list[Msg]) -> set[str]:
    return set().union(*(numbers_in(_text(m)) for m in messages)) if messages else set()


def _ids(messages: list[Msg]) -> set[str]:
    out: set[str] = set()
    for m in messages:
        if m.get("tool_call_id"):
            out.add(m["tool_call_id"])
        for tc in m.get("tool_calls") or []:
            out.add(tc["id"])
    return out


def _error_lines(messages: list[Msg]) -> set[str]:
    """Every line naming an error (the library's definition; the survival check below is the test's own)."""
    out: set[str] = set()
    for m in messages:
        out |= error_line_set(_text(m), instructions=False)
    return out


_NOISE = re.compile(
    r"::\S+ PASSED\b|^\s*(?:Compiling|Downloaded|Downloading|Collecting|Using cached) |^npm (?:WARN deprecated|http fetch)"
    r"|━|^[0-9a-f]{12}: |---> |^\s*\(use \"git|^index [0-9a-f]|^Requirement already satisfied|^\s+Updating crates"
)


def _superseded_reads(messages: list[Msg]) -> set[str]:
    """tool_call ids of reads whose path a later call reads or writes (test-side, independent)."""
    events: list[tuple[str, str, list[str]]] = []
    for i, m in enumerate(messages):
        for pos, tc in enumerate(m.get("tool_calls") or []):
            try:
                args = json.loads(tc["function"]["arguments"])
            except ValueError:
                args = None
            kind = classify(ToolCall(tc["id"], tc["function"]["name"], "", args if isinstance(args, dict) else None, i, pos))
            if kind:
                events.append((tc["id"], kind[0], kind[1]))
    out: set[str] = set()
    for k, (cid, kind, paths) in enumerate(events):
        if kind == "read" and any(set(paths) & set(p) for _, _, p in events[k + 1 :]):
            out.add(cid)
    return out


def signal_numbers(messages: list[Msg], *, max_tool_lines: int = 120) -> set[str]:
    """The numbers that must survive, by an independent definition of the kept signal: everything in
    system/user/assistant messages and tool-call arguments; every error line; tool results that are not
    superseded reads, minus their noise lines (passing tests, progress, download/compile lines), and only
    when no line cap applies (≤ ``max_tool_lines`` lines after the noise)."""
    superseded = _superseded_reads(messages)
    out: set[str] = set()
    for m in messages:
        if m.get("role") not in ("tool", "function"):
            out |= numbers_in(_text(m))
            continue
        if m.get("tool_call_id") in superseded:
            continue
        lines = [x for x in _text(m).split("\n") if not _NOISE.search(x)]
        if len(lines) <= max_tool_lines:
            out |= numbers_in("\n".join(lines))
    for line in _error_lines(messages):
        out |= numbers_in(line)
    return out


def assert_invariants(before: list[Msg], after: list[Msg], *, label: str = "") -> None:
    """Numbers of the kept signal, tool ids and error lines survive; nothing grows."""
    have = request_numbers(after)
    lost = signal_numbers(before) - have
    assert not lost, f"{label}: numbers lost: {sorted(lost)[:10]}"
    assert _ids(before) <= _ids(after), f"{label}: tool ids lost"
    text = "\n".join(_text(m) for m in after)
    missing = [line for line in _error_lines(before) if line not in text]
    assert not missing, f"{label}: error lines lost: {missing[:3]}"
    assert sum(len(_text(m)) for m in after) <= sum(len(_text(m)) for m in before), f"{label}: grew"
