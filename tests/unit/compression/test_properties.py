"""Property test over generated agent transcripts: in every mode, the numbers of the kept signal, every
tool id and every error line survive; the output is never longer; the input is never mutated."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.compression.helpers import assert_invariants, call, make_compressor, result

WORDS = ("parser", "token", "value", "config", "deploy", "retry", "the", "a", "we", "fix", "bug", "check",
         "because", "should", "cache", "worker", "limit", "timeout", "build", "release")
PATHS = ("src/app.py", "src/calc/parser.py", "lib/util.ts", "README.md", "config/prod.yaml")

Msg = dict[str, Any]

# Shapes are drawn by hypothesis; the bulk text comes from a Random seeded by a drawn integer (fast to
# generate, still reproducible).


def num(rng: random.Random) -> str:
    k = rng.randrange(4)
    if k == 0:
        return str(rng.randrange(100_000))
    if k == 1:
        return f"{rng.uniform(0, 1000):.3f}"
    if k == 2:
        return f"{rng.randrange(10)}.{rng.randrange(30)}.{rng.randrange(100)}"
    return str(rng.randrange(10))


def sentence(rng: random.Random) -> str:
    words = " ".join(rng.choices(WORDS, k=rng.randint(2, 10))).capitalize()
    extra = rng.choice(["", "", f" in {rng.choice(PATHS)}", f" at line {num(rng)}", f" with `x={num(rng)}`",
                        f" port={num(rng)}", " https://example.com/x?id=4", f" ({num(rng)} ms)"])
    return words + extra + "."


def prose(rng: random.Random) -> str:
    paras = []
    for _ in range(rng.randint(1, 4)):
        lines = [" ".join(sentence(rng) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.4:
            lines.append(rng.choice(["You must not touch prod.", "Never log secrets.",
                                     "ERROR: build failed with code 2", "Do not skip tests."]))
        paras.append("\n".join(line + rng.choice(["", "", "  ", "\t"]) for line in lines))
    return rng.choice(["\n\n", "\n\n\n\n", "\n \n\n"]).join(paras)


def code_file(rng: random.Random) -> str:
    return "\n".join(f"def f{k}(x):\n    return x * {num(rng)}\n" for k in range(rng.randint(3, 40)))


def pytest_output(rng: random.Random) -> str:
    n = rng.randint(5, 300)
    fail = rng.randrange(n)
    lines = [f"collected {n} items"]
    for k in range(n):
        lines.append(f"tests/test_x.py::test_{k} {'FAILED' if k == fail else 'PASSED'} [{(k + 1) * 100 // n:3d}%]")
    lines += [f"E       AssertionError: assert {num(rng)} == {num(rng)}", f"1 failed, {n - 1} passed in {num(rng)}s"]
    return "\n".join(lines)


def json_output(rng: random.Random) -> str:
    rows = [{"id": rng.randrange(10_000), "score": rng.random(), "name": rng.choice(WORDS)}
            for _ in range(rng.randint(1, 20))]
    return json.dumps(rows, indent=rng.choice([None, 2]))


def tool_turn(kind: str, rng: random.Random, cid: str) -> list[Msg]:
    path = rng.choice(PATHS[:3])
    if kind == "read":
        return [call(cid, "read_file", path=path), result(cid, code_file(rng))]
    if kind == "edit":
        return [call(cid, "str_replace_editor", command="str_replace", path=path, old_str="a", new_str="b"),
                result(cid, "edited")]
    if kind == "pytest":
        return [call(cid, "bash", command="pytest -v"), result(cid, pytest_output(rng))]
    if kind == "json":
        return [call(cid, "query", q="x"), result(cid, json_output(rng))]
    if kind == "error":
        return [call(cid, "bash", command="make"),
                result(cid, f"Traceback (most recent call last):\n  File \"src/app.py\", line {num(rng)}\nValueError: bad {num(rng)}")]
    return [call(cid, "run_job", job="x"), result(cid, prose(rng))]


KINDS = ("read", "read", "edit", "pytest", "json", "plain", "error")


@st.composite
def transcript(draw: st.DrawFn) -> list[Msg]:
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    turns = draw(st.lists(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3), min_size=3, max_size=12))
    msgs: list[Msg] = [{"role": "system", "content": "You are an agent.\nYou must not push."}]
    blocks: list[str] = []
    for t, kinds in enumerate(turns):
        text = prose(rng)
        if blocks and rng.random() < 0.5:
            text += "\n\n" + rng.choice(blocks)  # a repeat for dedup
        blocks.append(text)
        user: Msg = {"role": "user", "content": text}
        if rng.random() < 0.1:
            user = {"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}
        msgs.append(user)
        for k, kind in enumerate(kinds):
            msgs += tool_turn(kind, rng, f"call_{t}_{k}")
        msgs.append({"role": "assistant", "content": prose(rng)})
    return msgs


COMPRESSOR = make_compressor(
    "aggressive",
    engines={"relevance": {"max_chars": 400, "min_message_chars": 80}, "aging": {"live_turns": 1, "condense_after_turns": 2}},
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(transcript(), st.sampled_from(["lossless", "standard", "aggressive"]), st.one_of(st.none(), st.integers(1, 3000)))
def test_invariants_hold_in_every_mode(messages: list[Msg], mode: str, target: int | None) -> None:
    snapshot = copy.deepcopy(messages)
    out = COMPRESSOR.compress(messages, mode=mode, target_tokens=target, record=False)
    assert messages == snapshot
    assert out.chars_after <= out.chars_before
    assert not [s for s in out.stages if s.reason == "exception"], out.stages
    assert_invariants(messages, out.messages, label=mode)
