"""Outcome statistics per route and per key, decayed by age, for the scored strategies.

The fallback loop reports every attempt (:meth:`StatsBook.observe`); a start-up seeds the book from
the request log (:meth:`StatsBook.seed`), so a restart keeps what was learned. Counts live in one
bucket per day and are weighted ``0.5 ** (age_days / 2)`` over seven days (spec/core.md §2 "Scoring").
The router reads a :class:`Snapshot`, rebuilt at most every ``routing.stats_ttl_s``, so scoring a
request costs dictionary lookups, never an aggregation.

Each worker process keeps its own book (a replica fleet scores from its own traffic). Canceled
requests are never observed: a client that left says nothing about the route.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from freellm.routing.scoring import RouteStats
from freellm.store.base import RequestLogRow

__all__ = ["Snapshot", "StatsBook"]

_DAY = 86_400.0
_WINDOW_DAYS = 7
_HALF_LIFE_DAYS = 2.0
_PENALTY_DECAY_S = 120.0
"""The recent-rate-limit penalty loses one point every two minutes (and one per success)."""


@dataclass(slots=True)
class _Bucket:
    successes: int = 0
    failures: int = 0
    ttfb_sum: float = 0.0
    ttfb_n: int = 0
    tps_sum: float = 0.0
    tps_n: int = 0


@dataclass(slots=True)
class _Penalty:
    points: float = 0.0
    at: float = 0.0

    def value(self, now: float) -> float:
        return max(0.0, self.points - max(0.0, now - self.at) / _PENALTY_DECAY_S)

    def add(self, points: float, now: float) -> None:
        self.points = max(0.0, self.value(now) + points)
        self.at = now


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The decayed statistics as of ``at``: per route label, per key scope, and each route's
    successes today (for its daily headroom) and recent-rate-limit penalty."""

    at: float
    routes: dict[str, RouteStats] = field(default_factory=dict)
    keys: dict[str, RouteStats] = field(default_factory=dict)
    today: dict[str, int] = field(default_factory=dict)
    penalties: dict[str, float] = field(default_factory=dict)


class StatsBook:
    def __init__(self, ttl_s: float) -> None:
        self._ttl = ttl_s
        self._routes: dict[str, dict[int, _Bucket]] = {}
        self._keys: dict[str, dict[int, _Bucket]] = {}
        self._penalties: dict[str, _Penalty] = {}
        self._snapshot: Snapshot | None = None

    # ---- recording ------------------------------------------------------------------------------------

    def observe(
        self,
        label: str,
        key_scope: str | None,
        *,
        ok: bool,
        now: float,
        ttfb_ms: int | None = None,
        duration_ms: int | None = None,
        tokens_out: int = 0,
        rate_limited: bool = False,
    ) -> None:
        """One attempt's outcome. ``duration_ms`` is the whole answer's, for tokens per second."""
        day = int(now // _DAY)
        tps = None
        if ok and duration_ms is not None and duration_ms > 0 and tokens_out > 0:
            tps = tokens_out / (duration_ms / 1000.0)
        for book, name in ((self._routes, label), (self._keys, key_scope)):
            if name is None:
                continue
            bucket = book.setdefault(name, {}).setdefault(day, _Bucket())
            if ok:
                bucket.successes += 1
                if ttfb_ms is not None:
                    bucket.ttfb_sum += ttfb_ms
                    bucket.ttfb_n += 1
                if tps is not None:
                    bucket.tps_sum += tps
                    bucket.tps_n += 1
            else:
                bucket.failures += 1
        penalty = self._penalties.setdefault(label, _Penalty())
        penalty.add(-1.0 if ok else (3.0 if rate_limited else 1.0), now)

    def seed(self, rows: Iterable[RequestLogRow]) -> None:
        """Rebuild from request-log rows (oldest first is not required): each answered row is a
        success of its route, each hop of its trail (``extra["failed"]``) a failure."""
        for row in rows:
            if row.outcome == "canceled" or "fusion" in row.extra:
                continue
            failed = row.extra.get("failed")
            for label in failed if isinstance(failed, list) else ():
                if isinstance(label, str):
                    self.observe(label, None, ok=False, now=row.ts)
            if row.route and "/" in row.route and row.outcome == "success":
                self.observe(
                    row.route,
                    None,
                    ok=True,
                    now=row.ts,
                    ttfb_ms=row.ttfb_ms,
                    duration_ms=row.latency_ms,
                    tokens_out=row.tokens_out,
                )
        self._snapshot = None

    # ---- reading --------------------------------------------------------------------------------------

    def snapshot(self, now: float) -> Snapshot:
        """The current statistics, rebuilt when older than the TTL."""
        snap = self._snapshot
        if snap is not None and now - snap.at < self._ttl:
            return snap
        day = int(now // _DAY)
        snap = Snapshot(
            at=now,
            routes={name: _decayed(buckets, day) for name, buckets in self._prune(self._routes, day)},
            keys={name: _decayed(buckets, day) for name, buckets in self._prune(self._keys, day)},
            today={name: b[day].successes for name, b in self._routes.items() if day in b},
            penalties={name: p.value(now) for name, p in self._penalties.items() if p.value(now) > 0},
        )
        self._snapshot = snap
        return snap

    @staticmethod
    def _prune(book: dict[str, dict[int, _Bucket]], day: int) -> list[tuple[str, dict[int, _Bucket]]]:
        out: list[tuple[str, dict[int, _Bucket]]] = []
        for name in list(book):
            buckets = book[name]
            for old in [d for d in buckets if day - d >= _WINDOW_DAYS]:
                del buckets[old]
            if buckets:
                out.append((name, buckets))
            else:
                del book[name]
        return out


def _decayed(buckets: dict[int, _Bucket], day: int) -> RouteStats:
    successes = failures = ttfb_w = ttfb_sum = tps_w = tps_sum = 0.0
    samples = 0
    for d, b in buckets.items():
        w = math.pow(0.5, (day - d) / _HALF_LIFE_DAYS)
        successes += w * b.successes
        failures += w * b.failures
        samples += b.successes + b.failures
        if b.ttfb_n:
            ttfb_w += w * b.ttfb_n
            ttfb_sum += w * b.ttfb_sum
        if b.tps_n:
            tps_w += w * b.tps_n
            tps_sum += w * b.tps_sum
    return RouteStats(
        successes=successes,
        failures=failures,
        ttfb_ms=ttfb_sum / ttfb_w if ttfb_w else None,
        tokens_per_s=tps_sum / tps_w if tps_w else None,
        samples=samples,
    )
