"""The fail-open fidelity gate: every discard reason, and the kept-signal rule for numbers."""

from __future__ import annotations

from typing import Any

import pytest

from freellm.compression import compressor as compressor_mod
from freellm.compression.gate import SpanCache, check
from freellm.compression.registry import EngineSpec
from freellm.compression.types import EngineContext, EngineResult, Slots, with_content
from tests.unit.compression.helpers import call, make_compressor, result

Msg = dict[str, Any]


def verdict(before: list[Msg], after: list[Msg | None], dropped: dict[int, list[str]] | None = None) -> str:
    return check(before, after, dropped or {}, SpanCache()).reason


def test_unchanged_and_inflation() -> None:
    m = [{"role": "user", "content": "hello there"}]
    assert verdict(m, list(m)) == "unchanged"
    assert verdict(m, [dict(m[0])]) == "unchanged"  # an equal copy is no change
    assert verdict(m, [with_content(m[0], "hello there!")]) == "inflation"
    assert verdict(m, [with_content(m[0], "hello thera")]) == "inflation"  # not smaller
    assert verdict(m, [with_content(m[0], "hello")]) == "applied"


def test_every_number_literal_must_survive() -> None:
    m = [{"role": "user", "content": "retry 3 times after 1.5 s on port 8080 please"}]
    assert verdict(m, [with_content(m[0], "retry 3 times after 1.5 s on port 8080")]) == "applied"
    assert verdict(m, [with_content(m[0], "retry 3 times on port 8080")]) == "fidelity"
    # surviving anywhere in the request is enough (dedup leaves the earlier copy)
    two = [{"role": "user", "content": "port 8080"}, {"role": "user", "content": "port 8080 again"}]
    assert verdict(two, [two[0], with_content(two[1], "again")]) == "applied"


def test_numbers_in_declared_dropped_lines_are_not_required_but_error_lines_are() -> None:
    log = "test_a PASSED [ 50%]\ntest_b PASSED [100%]\nsummary: 2 passed"
    m = [result("c1", log)]
    new = [with_content(m[0], "summary: 2 passed")]
    assert verdict(m, new) == "fidelity"  # 50 and 100 vanished, nothing declared
    assert verdict(m, new, {0: ["test_a PASSED [ 50%]", "test_b PASSED [100%]"]}) == "applied"
    err = [result("c1", "ok 1\nE   AssertionError: 1 != 2\nok 2")]
    claimed = {0: ["E   AssertionError: 1 != 2"]}
    assert verdict(err, [with_content(err[0], "ok 1\nok 2")], claimed) == "fidelity"


def test_error_constraint_lines_and_hunk_headers_must_survive() -> None:
    m = [{"role": "user", "content": "Keep it short.\nYou must not touch prod.\nThanks a lot for the help"}]
    assert verdict(m, [with_content(m[0], "Keep it short.\nYou must not touch prod.")]) == "applied"
    assert verdict(m, [with_content(m[0], "Keep it short.\nThanks a lot for the help")]) == "fidelity"
    d = [result("c", "@@ -1,2 +1,2 @@\n-a\n+b\nsome trailing words here")]
    assert verdict(d, [with_content(d[0], "-a\n+b\nsome trailing words here")], {0: ["@@ -1,2 +1,2 @@"]}) == "fidelity"


def test_other_spans_95_percent_and_json_keys_90_percent() -> None:
    urls = " ".join(f"https://example.com/p{k}" for k in range(40))
    m = [{"role": "assistant", "content": urls + " trailing words"}]
    # one URL of 40 is 2.5 % of the spans (digits glued to a letter, like p7, are not number literals)
    assert verdict(m, [with_content(m[0], urls.replace(" https://example.com/p7", ""))]) == "applied"
    lose3 = urls.replace(" https://example.com/p7", "").replace(" https://example.com/p8", "")
    assert verdict(m, [with_content(m[0], lose3.replace(" https://example.com/p9", ""))]) == "fidelity"
    names = " ".join(f"`name_{chr(97 + k % 26)}{chr(97 + k // 26)}`" for k in range(40))
    m = [{"role": "assistant", "content": names + " trailing words"}]
    lose1 = names.replace(" `name_ha`", "")
    lose3 = lose1.replace(" `name_ia`", "").replace(" `name_ja`", "")
    assert verdict(m, [with_content(m[0], lose1)]) == "applied"
    assert verdict(m, [with_content(m[0], lose3)]) == "fidelity"
    keys = "{" + ",".join(f'"k_{chr(97 + k)}": true' for k in range(20)) + "}"
    m = [result("c", keys)]
    drop_two = keys.replace('"k_a": true,', "").replace('"k_b": true,', "")
    drop_three = drop_two.replace('"k_c": true,', "")
    assert verdict(m, [with_content(m[0], drop_two)]) == "applied"
    assert verdict(m, [with_content(m[0], drop_three)]) == "fidelity"


def test_tool_ids_must_survive() -> None:
    m = [call("call_9", "f"), result("call_9", "output text here")]
    assert verdict(m, [m[0], None]) == "fidelity"
    assert verdict(m, [m[0], with_content(m[1], "output")]) == "applied"


def _spec(engine_id: str, fn: Any) -> EngineSpec:
    from freellm.compression.engines import lite

    return EngineSpec(engine_id, False, lite.Params, fn)


def test_exception_and_bad_output_are_discarded_fail_open(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(messages: Slots, ctx: EngineContext, params: Any) -> EngineResult:
        raise RuntimeError("engine bug")

    def short(messages: Slots, ctx: EngineContext, params: Any) -> EngineResult:
        return EngineResult(list(messages)[:-1])

    def drop_numbers(messages: Slots, ctx: EngineContext, params: Any) -> EngineResult:
        return EngineResult([with_content(m, "x") if m else m for m in messages])

    engines = (_spec("dedup", boom), _spec("lite", short), _spec("jsoncompact", drop_numbers))
    monkeypatch.setattr(compressor_mod, "ENGINES", engines)
    c = make_compressor("lossless")
    msgs = [{"role": "user", "content": "send 42 widgets to bay 7"}]
    out = c.compress(msgs, mode="lossless")
    assert [(s.engine, s.reason) for s in out.stages] == [
        ("dedup", "exception"),
        ("lite", "exception"),
        ("jsoncompact", "fidelity"),
    ]
    assert out.messages == msgs and not out.changed and out.saved_chars == 0
    stats = c.stats()["engines"]
    assert stats["dedup"]["discarded"] == stats["lite"]["discarded"] == stats["jsoncompact"]["discarded"] == 1


def test_stage_reasons_in_a_real_run() -> None:
    c = make_compressor("aggressive", engines={"aging": {"enabled": False}})
    msgs = [{"role": "user", "content": "a  \n\n\n\nb"}]
    out = c.compress(msgs, mode="aggressive")
    reasons = {s.engine: s.reason for s in out.stages}
    assert reasons["lite"] == "applied" and reasons["dedup"] == "unchanged"
    assert reasons["aging"] == "disabled" and reasons["hard-budget"] == "no_target"
    out = c.compress([{"role": "user", "content": "tiny"}], mode="aggressive", target_tokens=100)
    assert {s.reason for s in out.stages} == {"target_reached", "disabled"}
