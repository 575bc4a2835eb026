"""The gate's per-call reuse: every text is scanned for spans at most once per ``compress`` call, the
quick proof avoids scanning the messages an engine leaves alone, and none of it changes an output."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import transcript
from freellm.compression import gate, spancache
from freellm.compression.gate import SpanCache, check
from freellm.compression.protect import Spans
from tests.unit.compression.helpers import make_compressor

Msg = dict[str, Any]

# sha256 of the lossless output on bench/transcript.py's transcript, recorded with the gate before the
# quick proof and the span reuse (every span set computed in full, for every message, per engine).
BENCH_LOSSLESS_SHA256 = "cd40ca9f5af20164ce6e44f6d6a1c337cca53d71063e9ee9cebef0531c867b87"


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Record every call of the real span finder (it still runs)."""
    calls: list[tuple[str, bool]] = []
    real = spancache.spans_of

    def counting(text: str, *, instructions: bool) -> Spans:
        calls.append((text, instructions))
        return real(text, instructions=instructions)

    monkeypatch.setattr(spancache, "spans_of", counting)
    return calls


def test_bench_transcript_output_is_unchanged_and_scans_few_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy(monkeypatch)
    msgs = transcript.messages()
    out = make_compressor("lossless").compress(msgs, mode="lossless")
    digest = hashlib.sha256(json.dumps(out.messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert digest == BENCH_LOSSLESS_SHA256
    assert [(s.engine, s.reason, s.saved_chars) for s in out.stages] == [
        ("dedup", "applied", 3458),
        ("lite", "applied", 681),
        ("jsoncompact", "applied", 4264),
    ]
    assert (out.chars_before, out.chars_after) == (87561, 79158)
    # three engines, 55 messages: the full gate scanned every message at least once (and the rewritten
    # ones again after each engine); the quick proof leaves only jsoncompact's JSON bodies to scan
    assert len(calls) == len(set(calls))
    assert 0 < len(calls) <= len(msgs) // 10


def test_each_text_is_scanned_once_per_call_when_the_full_judgement_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _spy(monkeypatch)
    rng = random.Random(5)
    body = "\n".join(f"\x1b[32mok\x1b[0m step {k} took {rng.randint(1, 900)} ms  " for k in range(40))
    msgs: list[Msg] = [{"role": "system", "content": "You must keep every number."}]
    for k in range(6):
        msgs.append({"role": "user", "content": f"run {k}"})
        msgs.append({"role": "assistant", "content": body + "\n\n\n\n" + body})  # dedup, then lite
    out = make_compressor("lossless").compress(msgs, mode="lossless")
    assert [s.reason for s in out.stages[:2]] == ["applied", "applied"]
    # the escape codes send every engine to the full judgement, which widens to the whole request
    assert calls and len(calls) == len(set(calls))


def test_a_second_call_scans_again() -> None:
    """The memo lives for one call: nothing of a prompt outlives its request."""
    a, b = SpanCache(), SpanCache()
    assert a.spans("port 8080", instructions=True) is a.spans("port 8080", instructions=True)
    assert a.spans("port 8080", instructions=True) == b.spans("port 8080", instructions=True)
    assert a.spans("port 8080", instructions=True) is not b.spans("port 8080", instructions=True)


def test_an_escape_sequence_across_messages_goes_to_the_full_judgement() -> None:
    """The request's text is searched ANSI-stripped as a whole, and an OSC sequence opened in one message
    and closed in the next swallows the line between: the constraint line is gone, whatever a per-message
    look says."""
    before: list[Msg | None] = [
        {"role": "user", "content": "x\x1b]0;"},
        {"role": "user", "content": "You must not touch prod.\x07"},
        {"role": "user", "content": "Keep it short.\nYou must not touch prod."},
    ]
    after = [before[0], before[1], {"role": "user", "content": "Keep it short."}]
    verdict = check(before, after, {}, SpanCache())
    assert (verdict.reason, verdict.detail) == (
        "fidelity",
        "1 error/constraint line(s) or hunk header(s) lost",
    )


SNIPPETS = [
    "retry 3 times",
    "took 1.5s",
    "v1.2.3 and 1e-5 and 12%",
    "see src/app/main.py:12:3",
    "https://x.example/z?a=1",
    "timeout=30",
    '"name": 1,',
    '"key"',
    "  : 2",
    "```py",
    "x = 1  ",
    "```",
    "~~~",
    "`code 7`",
    "E       AssertionError: 1 != 2",
    "FAILED tests/t.py::test_x",
    "You must not touch prod.",
    "Traceback (most recent call last):",
    "@@ -1,2 +1,3 @@",
    "+added 4",
    "\x1b[31mred 42\x1b[0m",
    "\x1b]8;;http://a/b",
    "link\x07",
    "\t\ttab 5\t",
    "test_12 a1b2",
    "  at foo (bar.js:1:2)",
    'File "x.py", line 3, in f',
    "\u00a0nbsp 6\u00a0",
    "",
]


@st.composite
def _text(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(SNIPPETS), max_size=8))
    pads = draw(
        st.lists(
            st.sampled_from(["", " ", "  ", "\t", " more words"]), min_size=len(parts), max_size=len(parts)
        )
    )
    return "\n".join(p + q for p, q in zip(parts, pads, strict=True))


def _rewrite(text: str, how: int, other: str) -> str:
    lines = text.split("\n")
    if how == 0:
        return "\n".join(line.rstrip() for line in lines)
    if how == 1:
        return "\n".join(lines[1:])
    if how == 2:
        return "[repeated from earlier in this conversation: x…]"
    if how == 3:
        return "\n".join(line.strip() for line in lines)
    if how == 4:
        return text[: len(text) // 2]
    return other[: max(0, len(text) - 1)]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), _text()), min_size=1, max_size=6
    ),
    st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=6, max_size=6),
    st.booleans(),
)
def test_the_quick_proof_agrees_with_the_full_judgement(
    pairs: list[tuple[str, str]], rewrites: list[int | None], declare: bool
) -> None:
    before: list[Msg | None] = [{"role": role, "content": text} for role, text in pairs]
    after: list[Msg | None] = list(before)
    dropped: dict[int, list[str]] = {}
    for i, m in enumerate(before):
        how = rewrites[i]
        if m is None or how is None:
            continue
        if how == 6:
            after[i] = None
            continue
        new = _rewrite(m["content"], how, pairs[(i + 1) % len(pairs)][1])
        after[i] = {**m, "content": new}
        if declare and how == 1 and m["content"]:
            dropped[i] = m["content"].split("\n")[:1]
    verdict = check(before, after, dropped, SpanCache())
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if a is not b and a != b]
    if verdict.reason in ("unchanged", "inflation"):
        return
    full = gate._judge(before, after, changed, dropped, SpanCache())
    assert (verdict.reason, verdict.detail) == (full.reason, full.detail)
