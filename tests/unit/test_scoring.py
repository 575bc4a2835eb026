"""Route scoring (freellm/routing/scoring.py): strategy names, the score's components, the order per
strategy, exploration and key choice.

Golden files in ``tests/golden/scoring/scoring_*.json``: each holds ``routes`` (the
:class:`~freellm.routing.scoring.RouteFacts` fields, in chain order), ``stats`` (by label), optional
``strategies`` (default: all) and the reviewed ``expected`` output — per strategy, the deterministic
(``rng=None``) order with the score and every component rounded to 6 places. ``claims`` are the
hand-written facts each file exists to show ("under fast, beta before alpha"); they are checked against
``expected`` so a regenerated golden cannot silently lose its point. After an intended change run
``FREELLM_UPDATE_GOLDEN=1 pytest tests/unit/test_scoring.py`` and review the diff.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freellm.routing.scoring import (
    EXPLORATION_MAX_SAMPLES,
    PRESETS,
    STRATEGIES,
    RouteFacts,
    RouteStats,
    Scored,
    Strategy,
    Weights,
    cost_score,
    headroom_factor,
    intelligence_scores,
    order_by_weights,
    order_keys,
    order_routes,
    rate_limit_factor,
    reliability_score,
    resolve_strategy,
    speed_score,
    strategy_names,
)
from tests.unit.helpers import GOLDEN_ROOT, check_golden, golden_files

GOLDEN = GOLDEN_ROOT / "scoring"
FILES = golden_files(GOLDEN, "scoring")
BANDIT: tuple[Strategy, ...] = ("balanced", "fast", "smart", "reliable", "cheap")


def _facts(doc: dict[str, Any]) -> list[RouteFacts]:
    return [RouteFacts(**route) for route in doc["routes"]]


def _stats(doc: dict[str, Any]) -> dict[str, RouteStats]:
    return {label: RouteStats(**s) for label, s in doc["stats"].items()}


def _row(s: Scored) -> dict[str, Any]:
    return {
        "label": s.label,
        "score": round(s.score, 6),
        "reliability": round(s.reliability, 6),
        "speed": round(s.speed, 6),
        "intelligence": round(s.intelligence, 6),
        "cost": round(s.cost, 6),
    }


def _run(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    facts, stats = _facts(doc), _stats(doc)
    strategies = doc.get("strategies", list(STRATEGIES))
    return {name: [_row(s) for s in order_routes(facts, stats, name)] for name in strategies}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scoring_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    check_golden(path, doc, _run(doc))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_a_golden_file_shows_what_it_claims(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert doc["claims"], path.name
    for claim in doc["claims"]:
        order = [row["label"] for row in doc["expected"][claim["strategy"]]]
        ahead, behind = claim["before"]
        assert order.index(ahead) < order.index(behind), f"{path.name}: {claim}"


def test_the_golden_set_covers_every_strategy_and_keeps_priority_order() -> None:
    seen: set[str] = set()
    for path in FILES:
        doc = json.loads(path.read_text())
        seen.update(doc["expected"])
        chain = [route["label"] for route in doc["routes"]]
        assert [row["label"] for row in doc["expected"]["priority"]] == chain, path.name
        for strategy, rows in doc["expected"].items():
            assert sorted(row["label"] for row in rows) == sorted(chain), (path.name, strategy)
    assert seen == set(STRATEGIES)


# ---- strategy names ---------------------------------------------------------------------------------

ALIASES: dict[str, Strategy] = {
    "priority": "priority",
    "balanced": "balanced",
    "fast": "fast",
    "fastest": "fast",
    "speed": "fast",
    "smart": "smart",
    "smartest": "smart",
    "intelligence": "smart",
    "reliable": "reliable",
    "reliability": "reliable",
    "cheap": "cheap",
    "cheapest": "cheap",
    "price": "cheap",
    "budget": "cheap",
}


@pytest.mark.parametrize(("name", "strategy"), ALIASES.items())
def test_every_alias_resolves(name: str, strategy: Strategy) -> None:
    assert resolve_strategy(name) == strategy
    assert resolve_strategy(f"  {name.upper()}\t") == strategy
    assert resolve_strategy(name.title()) == strategy


@pytest.mark.parametrize(
    "junk",
    ["", "   ", "auto", "auto:fast", "fast!", "f ast", "fastestest", "priorities", "custom", "cheap-ish"],
)
def test_junk_resolves_to_none(junk: str) -> None:
    assert resolve_strategy(junk) is None


def test_strategy_names_lists_every_alias_sorted() -> None:
    names = strategy_names()
    assert names == sorted(ALIASES)
    names.append("mutated")
    assert "mutated" not in strategy_names()


def test_strategies_and_presets() -> None:
    assert STRATEGIES == ("priority", "balanced", "fast", "smart", "reliable", "cheap")
    assert set(PRESETS) == set(BANDIT)
    assert PRESETS["balanced"] == Weights(0.5, 0.25, 0.25)
    assert PRESETS["smart"] == Weights(0.35, 0.1, 0.55)
    assert PRESETS["fast"] == Weights(0.35, 0.55, 0.1)
    assert PRESETS["reliable"] == Weights(0.7, 0.15, 0.15)
    assert PRESETS["cheap"] == Weights(0.4, 0.2, 0.0, 0.4)
    with pytest.raises(TypeError):
        PRESETS["custom"] = Weights(1, 1, 1)  # type: ignore[index]


# ---- components -------------------------------------------------------------------------------------


def test_reliability_mean_without_rng() -> None:
    assert reliability_score(None, None) == 0.5
    assert reliability_score(RouteStats(), None) == 0.5
    assert reliability_score(RouteStats(successes=100), None) == pytest.approx(101 / 102)
    assert reliability_score(RouteStats(successes=3, failures=1), None) == pytest.approx(4 / 6)
    assert reliability_score(RouteStats(successes=-2, failures=-1), None) == 0.5


def test_thompson_sampling_is_reproducible_with_a_seed() -> None:
    stats = RouteStats(successes=7, failures=3)
    first = [reliability_score(stats, random.Random(42)) for _ in range(3)]
    assert first[0] == first[1] == first[2]
    assert 0.0 <= first[0] <= 1.0
    facts = [RouteFacts(f"p/m{i}", "medium", i + 1) for i in range(6)]
    all_stats = {f.label: RouteStats(successes=i + 1, failures=3, samples=i + 4) for i, f in enumerate(facts)}
    runs = [
        order_routes(facts, all_stats, "balanced", rng=random.Random(7), exploration=0.5) for _ in range(2)
    ]
    assert runs[0] == runs[1]
    other = [order_routes(facts, all_stats, "balanced", rng=random.Random(s)) for s in range(20)]
    assert len({tuple(s.reliability for s in run) for run in other}) == 20  # the samples do vary


def test_a_strong_route_beats_a_weak_one_in_nearly_every_draw() -> None:
    facts = [RouteFacts("weak/m", "large", 1), RouteFacts("strong/m", "large", 1)]
    stats = {
        "weak/m": RouteStats(successes=0, failures=100, samples=100),
        "strong/m": RouteStats(successes=100, failures=0, samples=100),
    }
    wins = sum(
        order_routes(facts, stats, "reliable", rng=random.Random(seed))[0].label == "strong/m"
        for seed in range(100)
    )
    assert wins >= 95


def test_speed_without_data_is_neutral() -> None:
    assert speed_score(None) == 0.6
    assert speed_score(RouteStats()) == pytest.approx(0.6)
    assert speed_score(RouteStats(successes=10)) == pytest.approx(0.6)


def test_speed_formula() -> None:
    fast = RouteStats(ttfb_ms=300, tokens_per_s=60)
    assert speed_score(fast) == pytest.approx(0.6 * (1 - 1 / 2.718281828459045) + 0.4)
    assert speed_score(RouteStats(ttfb_ms=100, tokens_per_s=1e9)) == pytest.approx(1.0)
    assert speed_score(RouteStats(ttfb_ms=9000, tokens_per_s=0)) == 0.0
    assert speed_score(RouteStats(ttfb_ms=2650, tokens_per_s=0)) == pytest.approx(0.2)  # halfway: 0.4 * 0.5


def test_a_missing_part_counts_at_the_neutral_value() -> None:
    assert speed_score(RouteStats(ttfb_ms=300)) == pytest.approx(0.36 + 0.4)
    assert speed_score(RouteStats(ttfb_ms=5000)) == pytest.approx(0.36)
    assert speed_score(RouteStats(tokens_per_s=1e9)) == pytest.approx(0.6 + 0.24)


@given(
    ttfb=st.floats(min_value=300, max_value=4999),
    later=st.floats(min_value=1, max_value=4700),
    tps=st.one_of(st.none(), st.floats(min_value=0, max_value=5000)),
)
def test_speed_is_strictly_decreasing_in_ttfb(ttfb: float, later: float, tps: float | None) -> None:
    slower = min(ttfb + later, 5000.0)  # still at least 1 ms later, and inside the ramp
    assert speed_score(RouteStats(ttfb_ms=ttfb, tokens_per_s=tps)) > speed_score(
        RouteStats(ttfb_ms=slower, tokens_per_s=tps)
    )


@given(
    a=st.floats(min_value=0, max_value=1e6),
    b=st.floats(min_value=0, max_value=1e6),
    tps=st.one_of(st.none(), st.floats(min_value=0, max_value=5000)),
)
def test_speed_never_rises_with_ttfb_and_stays_in_range(a: float, b: float, tps: float | None) -> None:
    low, high = sorted((a, b))
    quick, slow = (
        speed_score(RouteStats(ttfb_ms=low, tokens_per_s=tps)),
        speed_score(RouteStats(ttfb_ms=high, tokens_per_s=tps)),
    )
    assert 0.0 <= slow <= quick <= 1.0


def test_300_ms_later_scores_lower_across_the_ramp() -> None:
    for ttfb in range(300, 4701, 100):
        assert speed_score(RouteStats(ttfb_ms=ttfb, tokens_per_s=100)) > speed_score(
            RouteStats(ttfb_ms=ttfb + 300, tokens_per_s=100)
        )


def test_intelligence_scaling() -> None:
    facts = [RouteFacts("a/small", "small", 1), RouteFacts("b/frontier", "frontier", 5)]
    assert intelligence_scores(facts) == {"a/small": 0.0, "b/frontier": 1.0}
    assert intelligence_scores([]) == {}
    assert intelligence_scores([RouteFacts("a/x", "large", 3)]) == {"a/x": 0.5}
    same = [RouteFacts("a/x", "large", 3), RouteFacts("b/x", "large", 3)]
    assert intelligence_scores(same) == {"a/x": 0.5, "b/x": 0.5}


def test_intelligence_raw_formula_and_unknowns() -> None:
    facts = [
        RouteFacts("top/m", "frontier", 1),  # 4000 - 31
        RouteFacts("mid/m", "medium", 4),  # 2000 - 62
        RouteFacts("unknown/m", None, None),  # 0 - 31*sqrt(50)
        RouteFacts("unranked/m", "medium", None),  # 2000 - 31*sqrt(50)
        RouteFacts("zero-rank/m", "medium", 0),  # rank < 1 counts as 1: 2000 - 31
    ]
    raw = {"top/m": 3969.0, "mid/m": 1938.0, "unknown/m": -31 * 50**0.5, "unranked/m": 2000 - 31 * 50**0.5}
    raw["zero-rank/m"] = 1969.0
    low, high = min(raw.values()), max(raw.values())
    expected = {k: (v - low) / (high - low) for k, v in raw.items()}
    assert intelligence_scores(facts) == pytest.approx(expected)


def test_cost_score_table() -> None:
    assert cost_score(RouteFacts("l/m", "frontier", 1, is_local=True)) == 1.0
    assert cost_score(RouteFacts("l/m", None, None, is_local=True)) == 1.0
    expected = {"small": 0.9, "medium": 0.7, "large": 0.5, "frontier": 0.3, None: 0.6}
    for tier, cost in expected.items():
        assert cost_score(RouteFacts("r/m", tier, 1)) == cost  # type: ignore[arg-type]


def test_headroom_factor() -> None:
    assert headroom_factor(None) == 1.0
    assert headroom_factor(1.0) == 1.0
    assert headroom_factor(0.2) == 1.0
    assert headroom_factor(0.1) == pytest.approx(0.55)
    assert headroom_factor(0.05) == pytest.approx(0.325)
    assert headroom_factor(0.0) == pytest.approx(0.1)
    assert headroom_factor(-0.5) == pytest.approx(0.1)


def test_rate_limit_factor() -> None:
    assert rate_limit_factor(0) == 1.0
    assert rate_limit_factor(5) == pytest.approx(0.7)
    assert rate_limit_factor(10) == pytest.approx(0.4)
    assert rate_limit_factor(50) == pytest.approx(0.4)
    assert rate_limit_factor(-3) == 1.0


# ---- ordering ---------------------------------------------------------------------------------------


def _chain() -> tuple[list[RouteFacts], dict[str, RouteStats]]:
    facts = [
        RouteFacts("a/weak", "small", 9, headroom=0.1, rate_limit_penalty=4),
        RouteFacts("b/strong", "frontier", 1),
        RouteFacts("c/local", "medium", 3, is_local=True),
    ]
    stats = {
        "a/weak": RouteStats(successes=1, failures=9, ttfb_ms=4000, tokens_per_s=5, samples=10),
        "b/strong": RouteStats(successes=90, failures=1, ttfb_ms=400, tokens_per_s=200, samples=91),
        "c/local": RouteStats(successes=20, failures=1, ttfb_ms=300, tokens_per_s=50, samples=21),
    }
    return facts, stats


def test_priority_keeps_the_given_order_and_computes_nothing() -> None:
    facts, stats = _chain()
    rng = random.Random(3)
    state = rng.getstate()
    result = order_routes(facts, stats, "priority", rng=rng, exploration=1.0)
    assert result == [Scored(f.label, 0.0, 0.0, 0.0, 0.0, 0.0) for f in facts]
    assert rng.getstate() == state  # no draw at all, not even for exploration


def test_the_score_is_the_weighted_blend_times_the_factors() -> None:
    facts, stats = _chain()
    by_label = {s.label: s for s in order_routes(facts, stats, "balanced")}
    weak = by_label["a/weak"]
    blend = (0.5 * weak.reliability + 0.25 * weak.speed + 0.25 * weak.intelligence) / 1.0
    assert weak.score == pytest.approx(blend * headroom_factor(0.1) * rate_limit_factor(4))
    assert weak.cost == 0.9
    assert by_label["c/local"].cost == 1.0


def test_ties_keep_the_priority_order() -> None:
    facts = [RouteFacts(f"p{i}/m", "large", 2) for i in range(5)]
    for strategy in BANDIT:
        assert [s.label for s in order_routes(facts, {}, strategy)] == [f.label for f in facts]


def test_custom_weights() -> None:
    facts, stats = _chain()
    cost_only = order_by_weights(facts, stats, Weights(0, 0, 0, cost=1))
    # a's small-tier quota (0.9) still beats b's frontier quota (0.3) after a's factors (0.55 and 0.76)
    assert [s.label for s in cost_only] == ["c/local", "a/weak", "b/strong"]
    assert order_by_weights(facts, stats, Weights(2, 1, 1)) == order_routes(facts, stats, "balanced")
    for bad in (Weights(0, 0, 0), Weights(-1, 1, 1)):
        with pytest.raises(ValueError, match="weights"):
            order_by_weights(facts, stats, bad)


@pytest.mark.parametrize("exploration", [-0.1, 1.5, float("nan")])
def test_exploration_out_of_range_is_an_error(exploration: float) -> None:
    facts, stats = _chain()
    with pytest.raises(ValueError, match="exploration"):
        order_routes(facts, stats, "balanced", rng=random.Random(1), exploration=exploration)


def test_an_empty_candidate_list() -> None:
    for strategy in STRATEGIES:
        assert order_routes([], {}, strategy, rng=random.Random(1), exploration=1.0) == []


def test_inputs_are_never_mutated() -> None:
    facts, stats = _chain()
    facts_before, stats_before = copy.deepcopy(facts), copy.deepcopy(stats)
    frozen_stats: Mapping[str, RouteStats] = MappingProxyType(stats)
    for strategy in STRATEGIES:
        order_routes(tuple(facts), frozen_stats, strategy, rng=random.Random(5), exploration=1.0)
        order_routes(facts, stats, strategy, rng=random.Random(5), exploration=1.0)
        order_routes(facts, stats, strategy)
    keys = ["k1", "k2", "k3"]
    order_keys(keys, stats, random.Random(1), 2)
    assert facts == facts_before
    assert stats == stats_before
    assert keys == ["k1", "k2", "k3"]


# ---- exploration ------------------------------------------------------------------------------------


def _explore_chain() -> tuple[list[RouteFacts], dict[str, RouteStats]]:
    """Two well-measured routes and a new one that never wins on its score (headroom 0 → factor 0.1)."""
    facts = [
        RouteFacts("a/known", "large", 1),
        RouteFacts("b/known", "large", 2),
        RouteFacts("c/new", "large", 3, headroom=0.0),
    ]
    stats = {
        "a/known": RouteStats(successes=50, failures=5, ttfb_ms=500, tokens_per_s=100, samples=55),
        "b/known": RouteStats(successes=50, failures=5, ttfb_ms=500, tokens_per_s=100, samples=55),
        "c/new": RouteStats(successes=1, failures=1, samples=EXPLORATION_MAX_SAMPLES - 1),
    }
    return facts, stats


def test_exploration_promotes_a_low_sample_route_at_the_given_share() -> None:
    facts, stats = _explore_chain()
    rng = random.Random(2024)
    promoted = 0
    for _ in range(2000):
        first = order_routes(facts, stats, "balanced", rng=rng, exploration=0.1)[0]
        if first.label == "c/new":
            assert first.explored
            promoted += 1
        else:
            assert not first.explored
    assert 0.07 <= promoted / 2000 <= 0.13


def test_exploration_off_without_rng_or_at_zero() -> None:
    facts, stats = _explore_chain()
    assert order_routes(facts, stats, "fast", exploration=1.0)[0].label != "c/new"
    rng = random.Random(9)
    state = rng.getstate()
    plain = order_routes(facts, stats, "fast", rng=rng, exploration=0.0)
    assert plain[0].label != "c/new"
    # exploration 0 draws nothing beyond the Thompson samples: same stream as a run that never explores
    rng.setstate(state)
    assert order_routes(facts, stats, "fast", rng=rng) == plain


def test_exploration_promotes_the_first_low_sample_route_in_scored_order() -> None:
    facts, stats = _explore_chain()
    facts.append(RouteFacts("d/new", "large", 1))  # unmeasured (no stats at all), scores above c/new
    result = order_routes(facts, stats, "balanced", exploration=1.0, rng=random.Random(1))
    assert result[0].label == "d/new" and result[0].explored
    assert sorted(s.label for s in result) == ["a/known", "b/known", "c/new", "d/new"]
    assert sum(s.explored for s in result) == 1


def test_exploration_without_a_low_sample_route_changes_nothing() -> None:
    facts, stats = _explore_chain()
    stats["c/new"] = RouteStats(successes=1, failures=1, samples=EXPLORATION_MAX_SAMPLES)
    explored = order_routes(facts, stats, "balanced", rng=random.Random(4), exploration=1.0)
    assert not any(s.explored for s in explored)
    assert explored[-1].label == "c/new"


# ---- key choice -------------------------------------------------------------------------------------


def test_keys_round_robin_without_stats() -> None:
    keys = ["k0", "k1", "k2"]
    assert order_keys(keys, {}, None, 0) == ["k0", "k1", "k2"]
    assert order_keys(keys, {}, None, 1) == ["k1", "k2", "k0"]
    assert order_keys(keys, {}, random.Random(1), 5) == ["k2", "k0", "k1"]
    assert order_keys(keys, {}, None, -1) == ["k2", "k0", "k1"]
    assert order_keys([], {}, None, 3) == []
    # all-zero stats are no stats
    assert order_keys(keys, {"k0": RouteStats()}, None, 1) == ["k1", "k2", "k0"]


def test_a_single_key_is_returned_as_is() -> None:
    stats = {"k0": RouteStats(successes=1, failures=50, samples=51)}
    assert order_keys(["k0"], stats, random.Random(1), 7) == ["k0"]


def test_keys_by_stats() -> None:
    keys = ["k0", "k1", "k2"]
    stats = {
        "k0": RouteStats(successes=2, failures=20, ttfb_ms=3000, samples=22),
        "k2": RouteStats(successes=40, failures=0, ttfb_ms=400, tokens_per_s=120, samples=40),
    }
    for start in range(3):
        assert order_keys(keys, stats, None, start) == ["k2", "k1", "k0"]
    wins = sum(order_keys(keys, stats, random.Random(seed), 0)[0] == "k2" for seed in range(100))
    assert wins >= 90
    assert order_keys(keys, stats, random.Random(11), 0) == order_keys(keys, stats, random.Random(11), 0)


def test_unmeasured_keys_still_take_turns_when_one_key_has_stats() -> None:
    keys = ["k0", "k1", "k2"]
    stats = {"k0": RouteStats(successes=1, failures=30, samples=31)}
    assert order_keys(keys, stats, None, 1) == ["k1", "k2", "k0"]
    assert order_keys(keys, stats, None, 2) == ["k2", "k1", "k0"]
