"""What a fusion request does with its panel's answers (freellm/fusion/decide.py).

Golden files in ``tests/golden/fusion/decide_*.json``: each names the ``function`` (``decide`` or
``fallback_answer``), holds its input (``answers``, ``failures`` and ``strategy``, or ``answers`` and
``json_required``) and the reviewed ``expected`` output (a verdict's fields, or ``{"index": …}``). After an
intended change run ``FREELLM_UPDATE_GOLDEN=1 pytest tests/unit/test_fusion_decide.py`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from freellm.fusion.decide import Answer, Failure, Verdict, decide, fallback_answer
from tests.unit.helpers import GOLDEN_ROOT, check_golden, golden_files

GOLDEN = GOLDEN_ROOT / "fusion"
FILES = golden_files(GOLDEN, "decide")


def _answers(doc: dict[str, Any]) -> list[Answer]:
    return [Answer(a["text"], a["tool_calls"]) for a in doc["answers"]]


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["function"] == "decide":
        failures = [Failure(f["status"], f["retry_at_ms"]) for f in doc["failures"]]
        return dataclasses.asdict(decide(_answers(doc), failures, strategy=doc["strategy"]))
    assert doc["function"] == "fallback_answer", f"unknown function {doc['function']!r}"
    return {"index": fallback_answer(_answers(doc), json_required=doc["json_required"])}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_decide_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    check_golden(path, doc, _run(doc))


def test_the_golden_set_covers_every_outcome() -> None:
    kinds: set[str] = set()
    reasons: set[str] = set()
    fallback: list[int | None] = []
    for path in FILES:
        doc = json.loads(path.read_text())
        expected = doc["expected"]
        if doc["function"] == "decide":
            kinds.add(expected["kind"])
            reasons.add(expected["reason"])
        else:
            fallback.append(expected["index"])
    assert kinds == {"fail", "tool_call", "best", "judge"}
    assert {"rate_limited", "upstream_failed", "tool_call", "best_of", "single_answer"} <= reasons
    assert None in fallback and any(i is not None for i in fallback)


def test_a_golden_verdict_index_points_at_an_answer() -> None:
    for path in FILES:
        doc = json.loads(path.read_text())
        index = doc["expected"]["index"]
        if index is not None:
            assert 0 <= index < len(doc["answers"]), path.name


# ---- the rules, one by one --------------------------------------------------------------------------


def test_a_429_verdict_carries_the_soonest_retry() -> None:
    failures = [Failure(429, 5_000), Failure(429, 3_000), Failure(429, None)]
    assert decide([], failures, strategy="synthesize") == Verdict(
        "fail", status=429, retry_at_ms=3_000, reason="rate_limited"
    )


def test_one_non_429_failure_makes_it_a_502() -> None:
    verdict = decide([], [Failure(429, 1_000), Failure(429, 2_000), Failure(500)], strategy="best_of")
    assert verdict == Verdict("fail", status=502, reason="upstream_failed")
    assert verdict.retry_at_ms is None
    assert verdict.index is None


def test_no_failures_and_no_answers_is_a_502() -> None:
    assert decide([], [], strategy="synthesize").status == 502


def test_any_answer_means_no_failure_verdict() -> None:
    verdict = decide([Answer("x")], [Failure(429, 1), Failure(429, 2)], strategy="synthesize")
    assert verdict.kind == "best"
    assert verdict.status == 0


@pytest.mark.parametrize("strategy", ["synthesize", "best_of"])
def test_the_first_tool_call_wins(strategy: str) -> None:
    answers = [Answer("a long text answer"), Answer("", tool_calls=True), Answer("more", tool_calls=True)]
    assert decide(answers, [], strategy=strategy) == Verdict("tool_call", index=1, reason="tool_call")


def test_a_lone_tool_call_wins() -> None:
    assert decide([Answer("", tool_calls=True)], [], strategy="synthesize").kind == "tool_call"


def test_best_of_picks_the_longest_and_the_earliest_of_equals() -> None:
    answers = [Answer("ab"), Answer("abcd"), Answer("wxyz"), Answer("a")]
    assert decide(answers, [], strategy="best_of") == Verdict("best", index=1, reason="best_of")


def test_best_of_with_one_answer_says_best_of() -> None:
    assert decide([Answer("only")], [], strategy="best_of") == Verdict("best", index=0, reason="best_of")


def test_a_single_answer_under_synthesize_needs_no_judge() -> None:
    assert decide([Answer("only")], [Failure(502)], strategy="synthesize") == Verdict(
        "best", index=0, reason="single_answer"
    )


def test_two_text_answers_go_to_the_judge() -> None:
    verdict = decide([Answer("one"), Answer("two")], [], strategy="synthesize")
    assert verdict == Verdict("judge")
    assert verdict.index is None


def test_length_counts_characters_not_bytes() -> None:
    answers = [Answer("ééééé"), Answer("abcdef")]
    assert decide(answers, [], strategy="best_of").index == 1
    assert fallback_answer(answers, json_required=False) == 1


# ---- the fallback when the judge fails --------------------------------------------------------------


def test_fallback_is_the_longest_answer() -> None:
    assert fallback_answer([Answer("abc"), Answer("abcdef"), Answer("ab")], json_required=False) == 1


def test_fallback_ties_go_to_the_earliest() -> None:
    assert fallback_answer([Answer("x"), Answer("yyy"), Answer("zzz")], json_required=False) == 1


def test_fallback_with_json_required_skips_what_does_not_parse() -> None:
    answers = [Answer('{"a": 1, "b": 2'), Answer('{"a": 1}'), Answer("[1, 2]"), Answer("not json at all!!")]
    assert fallback_answer(answers, json_required=True) == 1


def test_fallback_with_json_required_and_nothing_valid_is_none() -> None:
    assert fallback_answer([Answer("nope"), Answer("")], json_required=True) is None


def test_fallback_over_no_answers_is_none() -> None:
    assert fallback_answer([], json_required=False) is None
    assert fallback_answer([], json_required=True) is None


def test_fallback_without_json_required_takes_an_empty_answer_when_it_is_all_there_is() -> None:
    assert fallback_answer([Answer("")], json_required=False) == 0


def test_a_json_scalar_is_no_answer_for_a_response_format() -> None:
    answers = [Answer('{"city": "Paris"}'), Answer('"a much longer JSON string than the object"'), Answer("42")]
    assert fallback_answer(answers, json_required=True) == 0
    assert fallback_answer(answers[1:], json_required=True) is None
