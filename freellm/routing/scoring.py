"""Route scoring: the order in which the router tries a request's candidate routes, per strategy.

Spec §2 "Scoring", "Key choice" and "Exploration", with our changes:

* Strategies are ``priority`` (the chain order as configured, no scoring at all) and the bandit
  strategies ``balanced``, ``fast``, ``smart``, ``reliable`` and ``cheap``. ``cheap`` is ours (the
  reference maps it to ``balanced``): free tiers cost no money, so it prefers the routes whose quota is
  least valuable — local models first, then small ones — through a fourth component ``C``.
* ``score = ((wR·R + wS·S + wI·I + wC·C) / Σw) · headroom_factor · rate_limit_factor``, sorted by score
  descending, ties kept in the given (priority) order. There is no per-model override multiplier and no
  match-tier sort key here: the caller sorts groups by match tier and calls this once per tier.
* ``R`` is a Thompson sample of Beta(successes+1, failures+1) when the caller passes a
  :class:`random.Random`, and the posterior mean without one — so ``explain`` output and golden tests are
  deterministic, and the live router still explores naturally.

Pure: no I/O, no clock reads, no module-level mutable state. Randomness comes only from the injected
``rng``, so a seeded :class:`random.Random` reproduces an ordering exactly. The caller computes every
input (decayed stats from the request log, quota headroom, the 429 penalty ``p``).

Cost (measured on CPython 3.11, one core, 30 routes): ``priority`` computes nothing and only builds the
result list, about 35 µs — one frozen :class:`Scored` is about 1 µs to construct, which is most of it (a
router that does not need the :class:`Scored` records can skip the call under ``priority``). A bandit
strategy is about 110 µs with ``rng=None`` and about 165 µs with Thompson sampling (one ``betavariate``,
i.e. two gamma draws, per route): one pass of plain float arithmetic over the facts, one ``sqrt`` and at
most one ``exp`` per route, one stable ``O(n log n)`` sort, and the result list plus two small dicts.
No pydantic, no regexes, nothing cached between calls. Against an upstream call of hundreds of
milliseconds this is noise.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final, Literal

__all__ = [
    "EXPLORATION_MAX_SAMPLES",
    "PRESETS",
    "STRATEGIES",
    "TIERS",
    "RouteFacts",
    "RouteStats",
    "Scored",
    "Strategy",
    "Tier",
    "Weights",
    "cost_score",
    "headroom_factor",
    "intelligence_scores",
    "order_by_weights",
    "order_keys",
    "order_routes",
    "rate_limit_factor",
    "reliability_score",
    "resolve_strategy",
    "speed_score",
    "strategy_names",
]

Strategy = Literal["priority", "balanced", "fast", "smart", "reliable", "cheap"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("priority", "balanced", "fast", "smart", "reliable", "cheap")

Tier = Literal["frontier", "large", "medium", "small"]
TIERS: Final[tuple[Tier, ...]] = ("frontier", "large", "medium", "small")

_ALIASES: Final[Mapping[str, Strategy]] = MappingProxyType(
    {
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
)
_NAMES: Final[tuple[str, ...]] = tuple(sorted(_ALIASES))

EXPLORATION_MAX_SAMPLES: Final = 5
"""A route with fewer raw samples than this may be promoted to the front by exploration."""

# Speed: the throughput scale (tokens/s at which the tps part reaches 1 - 1/e) and the TTFB ramp.
_TPS_SCALE: Final = 60.0
_TTFB_BEST_MS: Final = 300.0
_TTFB_WORST_MS: Final = 5000.0
_SPEED_NEUTRAL: Final = 0.6
"""The speed score of a route without data, and the value a missing part (tps or ttfb) counts at."""

# Intelligence: tier points, the rank penalty and the rank assumed when none is configured.
_TIER_POINTS: Final[Mapping[Tier, int]] = MappingProxyType(
    {"frontier": 4, "large": 3, "medium": 2, "small": 1}
)
_RANK_PENALTY: Final = 31.0
_UNKNOWN_RANK: Final = 50

# Cost: how cheap a route's quota is to spend. Local models cost nothing at all; among free tiers the
# small models' quota is the most plentiful and least missed, the frontier models' the scarcest.
_LOCAL_COST: Final = 1.0
_TIER_COST: Final[Mapping[Tier, float]] = MappingProxyType(
    {"small": 0.9, "medium": 0.7, "large": 0.5, "frontier": 0.3}
)
_UNKNOWN_COST: Final = 0.6

_HEADROOM_LOW: Final = 0.2
_HEADROOM_FLOOR: Final = 0.1
_PENALTY_CAP: Final = 10.0
_PENALTY_WEIGHT: Final = 0.6

# Key choice: how much a key's reliability weighs against its speed.
_KEY_RELIABILITY: Final = 0.75
_KEY_SPEED: Final = 0.25


def resolve_strategy(name: str) -> Strategy | None:
    """The strategy ``name`` means, or ``None`` when it names none.

    Case-insensitive, surrounding spaces ignored, so config values and ``auto:<axis>`` model ids both
    resolve. Aliases: priority; balanced; fast, fastest, speed; smart, smartest, intelligence;
    reliable, reliability; cheap, cheapest, price, budget.
    """
    return _ALIASES.get(name.strip().lower())


def strategy_names() -> list[str]:
    """Every accepted name including aliases, sorted: for error messages, and for the config check that
    a profile may not take a name the strategies already claim. A fresh list each call."""
    return list(_NAMES)


@dataclass(frozen=True, slots=True)
class RouteFacts:
    """What the router knows about one candidate route, given in chain (priority) order."""

    label: str
    """``provider/model``: the key into the stats mapping and the label in the result."""
    tier: Tier | None
    """From config ``models[].tier`` (or the built-in catalog's size); ``None`` = unknown."""
    rank: int | None
    """``models[].rank``, 1 = best; ``None`` = unknown (counts as 50)."""
    is_local: bool = False
    headroom: float | None = None
    """Fraction of the daily quota left, 0..1; ``None`` = unknown (no penalty)."""
    rate_limit_penalty: float = 0.0
    """``p >= 0`` from recent 429s; the caller computes and decays it."""


@dataclass(frozen=True, slots=True)
class RouteStats:
    """Decayed aggregates of one route (or key) from the request log; the caller computes them."""

    successes: float = 0.0
    failures: float = 0.0
    ttfb_ms: float | None = None
    """Decayed mean time to first token of successes."""
    tokens_per_s: float | None = None
    """Decayed mean output tokens per second over the whole answer."""
    samples: int = 0
    """Raw (undecayed) request count, for exploration."""


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each component counts; only the ratios matter (the score divides by the sum)."""

    reliability: float
    speed: float
    intelligence: float
    cost: float = 0.0


PRESETS: Final[Mapping[Strategy, Weights]] = MappingProxyType(
    {
        "balanced": Weights(reliability=0.5, speed=0.25, intelligence=0.25),
        "smart": Weights(reliability=0.35, speed=0.1, intelligence=0.55),
        "fast": Weights(reliability=0.35, speed=0.55, intelligence=0.1),
        "reliable": Weights(reliability=0.7, speed=0.15, intelligence=0.15),
        "cheap": Weights(reliability=0.4, speed=0.2, intelligence=0.0, cost=0.4),
    }
)
"""The weights of every strategy but ``priority``, which does not score."""


@dataclass(frozen=True, slots=True)
class Scored:
    """One candidate in the order to try it, with the numbers that put it there (for logs and explain).

    Under ``priority`` nothing is computed: ``score`` and every component are ``0.0``.
    """

    label: str
    score: float
    reliability: float
    speed: float
    intelligence: float
    cost: float
    explored: bool = False
    """True when exploration moved this route to the front (its score did not earn the place)."""


def reliability_score(stats: RouteStats | None, rng: random.Random | None) -> float:
    """Beta(successes+1, failures+1): a Thompson sample with ``rng``, the posterior mean without.

    The sample is what makes the bandit explore on its own — a route with little evidence has a wide
    posterior and sometimes draws high — while the mean is the stable number to display. Negative
    counts (a caller's rounding) are treated as zero.
    """
    s = max(stats.successes, 0.0) if stats is not None else 0.0
    f = max(stats.failures, 0.0) if stats is not None else 0.0
    if rng is None:
        return (s + 1.0) / (s + f + 2.0)
    return rng.betavariate(s + 1.0, f + 1.0)


def _ttfb_score(ttfb_ms: float) -> float:
    """1 at <= 300 ms, 0 at >= 5000 ms, linear (so strictly decreasing) in between."""
    if ttfb_ms <= _TTFB_BEST_MS:
        return 1.0
    if ttfb_ms >= _TTFB_WORST_MS:
        return 0.0
    return (_TTFB_WORST_MS - ttfb_ms) / (_TTFB_WORST_MS - _TTFB_BEST_MS)


def speed_score(stats: RouteStats | None) -> float:
    """``0.6·(1-e^(-tps/60)) + 0.4·ttfb_score``; 0.6 with no data.

    A part without data counts at the neutral 0.6 instead of being dropped: only TTFB known gives
    ``0.36 + 0.4·ttfb_score`` (0.36..0.76), only tps known gives ``0.6·(1-e^(-tps/60)) + 0.24``. That keeps
    a half-measured route on the same scale as a fully measured one — rescaling the TTFB part alone to
    [0, 1] would let one fast first token outrank every route with real throughput data — and makes "no
    data at all" come out at exactly 0.6, consistently. The score is strictly decreasing in TTFB between
    300 and 5000 ms whatever the tps, so of two otherwise equal routes the later one always scores lower.
    Negative tps counts as 0.
    """
    if stats is None:
        return _SPEED_NEUTRAL
    tps, ttfb = stats.tokens_per_s, stats.ttfb_ms
    tps_part = _SPEED_NEUTRAL if tps is None else 1.0 - math.exp(-max(tps, 0.0) / _TPS_SCALE)
    ttfb_part = _SPEED_NEUTRAL if ttfb is None else _ttfb_score(ttfb)
    return 0.6 * tps_part + 0.4 * ttfb_part


def intelligence_scores(facts: Sequence[RouteFacts]) -> dict[str, float]:
    """Each route's ``tier·1000 - 31·√rank``, min-max scaled over ``facts`` to [0, 1], by label.

    Tier points: frontier 4, large 3, medium 2, small 1, unknown 0; an unknown rank counts as 50 and a
    rank below 1 as 1. Scaling over the candidates (not a global table) means "smart" always separates
    the routes actually on offer. All equal (or a single route) → 0.5 each: no information, no push.
    """
    raw: dict[str, float] = {}
    for fact in facts:
        points = _TIER_POINTS[fact.tier] if fact.tier is not None else 0
        rank = fact.rank if fact.rank is not None else _UNKNOWN_RANK
        raw[fact.label] = points * 1000.0 - _RANK_PENALTY * math.sqrt(max(rank, 1))
    if not raw:
        return raw
    low, high = min(raw.values()), max(raw.values())
    if high == low:
        return dict.fromkeys(raw, 0.5)
    span = high - low
    return {label: (value - low) / span for label, value in raw.items()}


def cost_score(fact: RouteFacts) -> float:
    """How cheap the route's quota is to spend, 0..1 (higher = cheaper).

    Free tiers cost nothing in money, so ``cheap`` means spending the least valuable quota: local routes
    1.0 (no quota at all); else by tier small 0.9, medium 0.7, large 0.5, frontier 0.3, unknown 0.6.
    """
    if fact.is_local:
        return _LOCAL_COST
    if fact.tier is None:
        return _UNKNOWN_COST
    return _TIER_COST[fact.tier]


def headroom_factor(headroom: float | None) -> float:
    """1 while at least 20% of the daily quota is left (or it is unknown), then falling linearly to 0.1
    at none left: a nearly spent route sinks but stays a last resort. Below 0 counts as 0."""
    if headroom is None or headroom >= _HEADROOM_LOW:
        return 1.0
    return _HEADROOM_FLOOR + (1.0 - _HEADROOM_FLOOR) * max(headroom, 0.0) / _HEADROOM_LOW


def rate_limit_factor(p: float) -> float:
    """``1 - 0.6·min(p, 10)/10``: recent 429s cost up to 60% of the score. A negative ``p`` counts as 0."""
    return 1.0 - _PENALTY_WEIGHT * min(max(p, 0.0), _PENALTY_CAP) / _PENALTY_CAP


def order_routes(
    facts: Sequence[RouteFacts],
    stats: Mapping[str, RouteStats],
    strategy: Strategy,
    *,
    rng: random.Random | None = None,
    exploration: float = 0.0,
) -> list[Scored]:
    """The candidates in the order to try them.

    ``priority``: the given order, unchanged, returned without computing anything (every number 0.0).
    Otherwise the strategy's preset weights, see :func:`order_by_weights`. ``stats`` is keyed by label; a
    route missing from it has no data. Never mutates its inputs.
    """
    if strategy == "priority":
        return [Scored(f.label, 0.0, 0.0, 0.0, 0.0, 0.0) for f in facts]
    return order_by_weights(facts, stats, PRESETS[strategy], rng=rng, exploration=exploration)


def order_by_weights(
    facts: Sequence[RouteFacts],
    stats: Mapping[str, RouteStats],
    weights: Weights,
    *,
    rng: random.Random | None = None,
    exploration: float = 0.0,
) -> list[Scored]:
    """The candidates ordered by ``weights`` (a preset, or custom weights).

    ``score = ((wR·R + wS·S + wI·I + wC·C) / Σw) · headroom_factor · rate_limit_factor``, sorted by score
    descending; equal scores keep the given (priority) order. With ``rng``, ``R`` is a Thompson sample
    (drawn route by route in the given order, so a seeded rng reproduces the result); without, the mean.

    ``exploration`` (0..1, opt-in): after scoring, one draw from ``rng`` (made only when ``exploration >
    0``; no ``rng`` → never) decides with that probability to move the first route in the scored order
    with fewer than :data:`EXPLORATION_MAX_SAMPLES` raw samples to the front, marked ``explored``. That
    gets new or rarely used routes measured at a bounded cost. No such route → the order stands.

    Raises ``ValueError`` for a negative weight, all-zero weights or ``exploration`` outside 0..1.
    """
    w_r, w_s, w_i, w_c = weights.reliability, weights.speed, weights.intelligence, weights.cost
    total = w_r + w_s + w_i + w_c
    if min(w_r, w_s, w_i, w_c) < 0.0 or not total > 0.0:
        raise ValueError(f"weights must be >= 0 with a positive sum, got {weights}")
    if not 0.0 <= exploration <= 1.0:
        raise ValueError(f"exploration must be within 0..1, got {exploration}")

    intelligence = intelligence_scores(facts)
    scored: list[Scored] = []
    for fact in facts:
        route_stats = stats.get(fact.label)
        r = reliability_score(route_stats, rng)
        s = speed_score(route_stats)
        i = intelligence[fact.label]
        c = cost_score(fact)
        blended = (w_r * r + w_s * s + w_i * i + w_c * c) / total
        score = blended * headroom_factor(fact.headroom) * rate_limit_factor(fact.rate_limit_penalty)
        scored.append(Scored(fact.label, score, r, s, i, c))
    scored.sort(key=lambda x: -x.score)  # stable: ties stay in priority order

    if rng is not None and exploration > 0.0 and rng.random() < exploration:
        for index, candidate in enumerate(scored):
            route_stats = stats.get(candidate.label)
            if (route_stats.samples if route_stats is not None else 0) < EXPLORATION_MAX_SAMPLES:
                del scored[index]
                scored.insert(0, replace(candidate, explored=True))
                break
    return scored


def _has_data(stats: RouteStats | None) -> bool:
    return stats is not None and (stats.samples > 0 or stats.successes > 0.0 or stats.failures > 0.0)


def order_keys(
    key_ids: Sequence[str], stats: Mapping[str, RouteStats], rng: random.Random | None, start: int
) -> list[str]:
    """The order in which to try several keys of one route.

    With at least two keys and at least one of them with data (in ``stats`` with samples or any
    successes/failures — an all-zero entry counts as none), by ``0.75·R + 0.25·S`` descending, ``R`` a
    Thompson sample with ``rng`` and the mean without. Otherwise round-robin: the keys rotated to begin at
    index ``start % len``, so the caller's counter spreads load evenly. Ties in the scored order fall back
    to that same rotation, so keys nobody has measured yet still take turns.
    """
    n = len(key_ids)
    if n == 0:
        return []
    offset = start % n
    rotated = [*key_ids[offset:], *key_ids[:offset]]
    if n < 2 or not any(_has_data(stats.get(k)) for k in rotated):
        return rotated
    scores = {
        k: _KEY_RELIABILITY * reliability_score(stats.get(k), rng) + _KEY_SPEED * speed_score(stats.get(k))
        for k in key_ids
    }
    rotated.sort(key=lambda k: -scores[k])
    return rotated
