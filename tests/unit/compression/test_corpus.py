"""Every mode on every corpus transcript: the fidelity invariants hold and each mode reaches at least its
recorded saving (``min_saving_pct`` in the corpus file; regenerate with
``make_corpus.py --reset-minimums`` after an intended change)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.golden.compression.report import CORPUS, MODES, run_mode
from tests.unit.compression.helpers import assert_invariants, make_compressor

ITEMS = sorted(CORPUS.glob("*.json"))
REQUIRED = {"reread_after_edit", "pytest_failure", "json_results", "coding_conversation", "build_outputs", "agent_20k"}


def test_corpus_is_complete() -> None:
    assert {p.stem for p in ITEMS} >= REQUIRED
    agent = json.loads((CORPUS / "agent_20k.json").read_text())["messages"]
    assert sum(len(m["content"]) for m in agent if isinstance(m.get("content"), str)) // 4 >= 20_000


@pytest.mark.parametrize("run", MODES)
@pytest.mark.parametrize("path", ITEMS, ids=[p.stem for p in ITEMS])
def test_corpus_item(path: Path, run: str) -> None:
    doc = json.loads(path.read_text())
    messages = doc["messages"]
    snapshot = copy.deepcopy(messages)
    outcome = run_mode(make_compressor("aggressive"), messages, run)
    assert messages == snapshot, "input mutated"
    assert_invariants(messages, outcome.messages, label=f"{path.stem}/{run}")
    system = [m for m in messages if m["role"] == "system"]
    assert [m for m in outcome.messages if m["role"] == "system"] == system, "system prompt touched"
    assert not [s for s in outcome.stages if s.reason == "exception"]
    saved = 100.0 * outcome.saved_chars / outcome.chars_before
    minimum = doc["min_saving_pct"][run]
    assert saved >= minimum, f"{path.stem}/{run}: saved {saved:.1f} % < recorded minimum {minimum} %"


def test_pytest_failure_standard_keeps_head_fail_and_tail() -> None:
    messages = json.loads((CORPUS / "pytest_failure.json").read_text())["messages"]
    out = make_compressor("standard").compress(messages, mode="standard")
    log = out.messages[3]["content"]
    lines = log.split("\n")
    assert lines[0].startswith("=====") and "test session starts" in lines[0]
    assert "tests/test_api.py::test_case_171 FAILED" in log
    assert "E       calc.parser.ParseError: unexpected '-' at 0" in log
    assert lines[-1].startswith("=") and "1 failed, 299 passed" in lines[-1]
    assert "PASSED" not in log
    assert len(log) < len(messages[3]["content"]) // 5
