"""StatsBook: day buckets decayed 0.5 ** (age / 2 days) over 7 days, the TTL-cached snapshot, tokens per
second and time to first byte, the recent-rate-limit penalty, key-scope statistics and seeding from
request-log rows."""

from __future__ import annotations

from typing import Any

import pytest

from freellm.routing.stats import Snapshot, StatsBook
from freellm.store.base import RequestLogRow, key_scope

DAY = 86_400.0
T0 = 1_700_006_400.0  # 2023-11-15 00:00:00 UTC: a whole UTC day, so day buckets are easy to reason about
NOON = T0 + DAY / 2
LABEL = "groq/llama"
OTHER = "cerebras/qwen"
KEY = key_scope("groq", "llama", "k1")


def row(i: int, **kw: Any) -> RequestLogRow:
    fields: dict[str, Any] = {
        "request_id": f"req-{i}",
        "ts": NOON,
        "surface": "openai_chat",
        "requested_model": "auto",
        "route": LABEL,
        "status": 200,
        "stream": False,
        "attempts": 1,
        "latency_ms": 1000,
        "ttfb_ms": 100,
        "tokens_in": 10,
        "tokens_out": 50,
    }
    fields.update(kw)
    return RequestLogRow(**fields)


# ---- decay ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("age_days", "weight"), [(0, 1.0), (2, 0.5), (4, 0.25), (6, 0.125)])
def test_counts_are_weighted_by_age(age_days: int, weight: float) -> None:
    book = StatsBook(ttl_s=0.0)
    then = NOON - age_days * DAY
    for _ in range(4):
        book.observe(LABEL, None, ok=True, now=then)
    book.observe(LABEL, None, ok=False, now=then)
    stats = book.snapshot(NOON).routes[LABEL]
    assert stats.successes == pytest.approx(4 * weight)
    assert stats.failures == pytest.approx(weight)
    assert stats.samples == 5  # the raw count, not decayed


def test_one_day_old_weighs_one_over_root_two() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON - DAY)
    assert book.snapshot(NOON).routes[LABEL].successes == pytest.approx(2**-0.5)


def test_days_are_utc_buckets_not_24_hour_ages() -> None:
    # One second before midnight is "yesterday": a full day old already.
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=T0 + DAY - 1)
    assert book.snapshot(T0 + DAY - 1).routes[LABEL].successes == pytest.approx(1.0)
    assert book.snapshot(T0 + DAY).routes[LABEL].successes == pytest.approx(2**-0.5)


def test_buckets_from_several_days_add_up() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON)
    book.observe(LABEL, None, ok=True, now=NOON - 2 * DAY)
    book.observe(LABEL, None, ok=False, now=NOON - 4 * DAY)
    stats = book.snapshot(NOON).routes[LABEL]
    assert stats.successes == pytest.approx(1.5)
    assert stats.failures == pytest.approx(0.25)
    assert stats.samples == 3


def test_buckets_older_than_seven_days_are_dropped() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON - 7 * DAY)  # 7 days: out of the window
    book.observe(LABEL, None, ok=True, now=NOON - 6 * DAY)  # 6 days: still in
    book.observe(OTHER, None, ok=True, now=NOON - 8 * DAY)  # only old data: the route disappears
    snap = book.snapshot(NOON)
    assert snap.routes[LABEL].successes == pytest.approx(0.125)
    assert snap.routes[LABEL].samples == 1
    assert OTHER not in snap.routes


def test_dropped_buckets_stay_dropped() -> None:
    # Pruning deletes the old buckets: going back in time does not bring them back.
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON)
    assert book.snapshot(NOON + 7 * DAY).routes == {}
    assert book.snapshot(NOON).routes == {}


def test_an_empty_book_has_an_empty_snapshot() -> None:
    snap = StatsBook(ttl_s=10.0).snapshot(NOON)
    assert snap == Snapshot(at=NOON)


# ---- the snapshot's TTL -----------------------------------------------------------------------------


def test_snapshot_is_cached_for_the_ttl() -> None:
    book = StatsBook(ttl_s=10.0)
    book.observe(LABEL, None, ok=True, now=NOON)
    first = book.snapshot(NOON)
    assert first.at == NOON
    assert first.routes[LABEL].successes == pytest.approx(1.0)

    book.observe(LABEL, None, ok=True, now=NOON + 1)  # not seen until the TTL passes
    same = book.snapshot(NOON + 9.999)
    assert same is first
    assert same.routes[LABEL].successes == pytest.approx(1.0)

    fresh = book.snapshot(NOON + 10)
    assert fresh is not first
    assert fresh.at == NOON + 10
    assert fresh.routes[LABEL].successes == pytest.approx(2.0)
    assert book.snapshot(NOON + 15) is fresh
    assert book.snapshot(NOON + 20) is not fresh


def test_seed_invalidates_the_cached_snapshot() -> None:
    book = StatsBook(ttl_s=1_000.0)
    first = book.snapshot(NOON)
    book.seed([row(1)])
    second = book.snapshot(NOON + 1)
    assert second is not first
    assert second.routes[LABEL].successes == pytest.approx(1.0)


# ---- latency and throughput -------------------------------------------------------------------------


def test_tokens_per_second_from_the_duration() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON, duration_ms=2000, tokens_out=100)  # 50 tok/s
    book.observe(LABEL, None, ok=True, now=NOON, duration_ms=500, tokens_out=50)  # 100 tok/s
    assert book.snapshot(NOON).routes[LABEL].tokens_per_s == pytest.approx(75.0)


@pytest.mark.parametrize(
    "kw",
    [
        {"ok": True, "duration_ms": None, "tokens_out": 100},
        {"ok": True, "duration_ms": 0, "tokens_out": 100},
        {"ok": True, "duration_ms": 1000, "tokens_out": 0},
        {"ok": False, "duration_ms": 1000, "tokens_out": 100},
    ],
)
def test_no_throughput_without_a_duration_tokens_or_success(kw: dict[str, Any]) -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, now=NOON, **kw)
    assert book.snapshot(NOON).routes[LABEL].tokens_per_s is None


def test_throughput_is_weighted_by_age() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON, duration_ms=1000, tokens_out=100)  # 100 tok/s, weight 1
    book.observe(LABEL, None, ok=True, now=NOON - 2 * DAY, duration_ms=1000, tokens_out=10)  # 10, weight 0.5
    assert book.snapshot(NOON).routes[LABEL].tokens_per_s == pytest.approx((100 + 0.5 * 10) / 1.5)


def test_ttfb_is_the_mean_of_successes() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON, ttfb_ms=100)
    book.observe(LABEL, None, ok=True, now=NOON, ttfb_ms=300)
    book.observe(LABEL, None, ok=True, now=NOON)  # no ttfb: not in the mean
    book.observe(LABEL, None, ok=False, now=NOON, ttfb_ms=5000)  # a failure's ttfb is ignored
    stats = book.snapshot(NOON).routes[LABEL]
    assert stats.ttfb_ms == pytest.approx(200.0)
    assert stats.successes == pytest.approx(3.0)
    assert stats.failures == pytest.approx(1.0)


def test_ttfb_mean_is_weighted_by_age() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON, ttfb_ms=100)
    book.observe(LABEL, None, ok=True, now=NOON - 2 * DAY, ttfb_ms=400)
    assert book.snapshot(NOON).routes[LABEL].ttfb_ms == pytest.approx((100 + 0.5 * 400) / 1.5)


def test_no_ttfb_when_none_was_measured() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=NOON)
    assert book.snapshot(NOON).routes[LABEL].ttfb_ms is None


# ---- today's successes --------------------------------------------------------------------------------


def test_today_counts_only_todays_successes() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=True, now=T0 + 10)
    book.observe(LABEL, None, ok=True, now=T0 + 20)
    book.observe(LABEL, None, ok=False, now=T0 + 30)
    book.observe(LABEL, None, ok=True, now=T0 - 10)  # yesterday
    book.observe(OTHER, None, ok=True, now=T0 - 10)  # only yesterday: not in today
    snap = book.snapshot(NOON)
    assert snap.today == {LABEL: 2}


# ---- the recent-rate-limit penalty ------------------------------------------------------------------


def test_penalty_points_per_outcome() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=False, rate_limited=True, now=NOON)
    assert book.snapshot(NOON).penalties == {LABEL: pytest.approx(3.0)}
    book.observe(LABEL, None, ok=False, now=NOON)
    assert book.snapshot(NOON).penalties == {LABEL: pytest.approx(4.0)}
    book.observe(LABEL, None, ok=True, now=NOON)
    assert book.snapshot(NOON).penalties == {LABEL: pytest.approx(3.0)}


def test_rate_limited_success_is_still_a_success() -> None:
    # ``rate_limited`` only matters for failures.
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=False, rate_limited=True, now=NOON)
    book.observe(LABEL, None, ok=True, rate_limited=True, now=NOON)
    assert book.snapshot(NOON).penalties == {LABEL: pytest.approx(2.0)}


def test_penalty_decays_one_point_per_two_minutes() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=False, rate_limited=True, now=NOON)
    book.observe(LABEL, None, ok=False, rate_limited=True, now=NOON)  # 6 points
    assert book.snapshot(NOON + 60).penalties[LABEL] == pytest.approx(5.5)
    assert book.snapshot(NOON + 240).penalties[LABEL] == pytest.approx(4.0)
    assert book.snapshot(NOON + 719).penalties[LABEL] == pytest.approx(1 / 120)
    assert LABEL not in book.snapshot(NOON + 720).penalties  # spent: zero penalties are left out
    assert book.snapshot(NOON + 10_000).penalties == {}


def test_penalty_decays_before_new_points_are_added() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, None, ok=False, rate_limited=True, now=NOON)  # 3
    book.observe(LABEL, None, ok=False, now=NOON + 240)  # 3 - 2 + 1 = 2
    assert book.snapshot(NOON + 240).penalties[LABEL] == pytest.approx(2.0)
    assert book.snapshot(NOON + 360).penalties[LABEL] == pytest.approx(1.0)


def test_penalty_never_goes_below_zero() -> None:
    book = StatsBook(ttl_s=0.0)
    for _ in range(5):
        book.observe(LABEL, None, ok=True, now=NOON)
    assert book.snapshot(NOON).penalties == {}
    book.observe(LABEL, None, ok=False, now=NOON)  # successes banked nothing: 0 + 1
    assert book.snapshot(NOON).penalties == {LABEL: pytest.approx(1.0)}


def test_penalty_is_per_route_label_not_per_key() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, KEY, ok=False, rate_limited=True, now=NOON)
    book.observe(OTHER, None, ok=False, now=NOON)
    assert book.snapshot(NOON).penalties == {LABEL: pytest.approx(3.0), OTHER: pytest.approx(1.0)}


# ---- key scopes -------------------------------------------------------------------------------------


def test_key_scope_statistics_are_kept_beside_the_routes() -> None:
    book = StatsBook(ttl_s=0.0)
    key2 = key_scope("groq", "llama", "k2")
    book.observe(LABEL, KEY, ok=True, now=NOON, ttfb_ms=100, duration_ms=1000, tokens_out=20)
    book.observe(LABEL, KEY, ok=False, now=NOON - 2 * DAY)
    book.observe(LABEL, key2, ok=True, now=NOON)
    book.observe(LABEL, None, ok=True, now=NOON)  # route only
    snap = book.snapshot(NOON)

    assert set(snap.keys) == {KEY, key2}
    k1 = snap.keys[KEY]
    assert k1.successes == pytest.approx(1.0)
    assert k1.failures == pytest.approx(0.5)
    assert k1.samples == 2
    assert k1.ttfb_ms == pytest.approx(100.0)
    assert k1.tokens_per_s == pytest.approx(20.0)
    assert snap.keys[key2].successes == pytest.approx(1.0)

    route = snap.routes[LABEL]
    assert route.successes == pytest.approx(3.0)
    assert route.failures == pytest.approx(0.5)
    assert route.samples == 4
    assert snap.today == {LABEL: 3}  # routes only, never key scopes


def test_key_scopes_age_out_too() -> None:
    book = StatsBook(ttl_s=0.0)
    book.observe(LABEL, KEY, ok=True, now=NOON - 7 * DAY)
    snap = book.snapshot(NOON)
    assert snap.keys == {}
    assert snap.routes == {}


# ---- seeding from the request log -------------------------------------------------------------------


def test_seed_counts_successes_and_failed_hops() -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed(
        [
            row(1, extra={"failed": [OTHER, "mistral/small"]}),
            row(2, ttfb_ms=300, latency_ms=500, tokens_out=100),
            row(3, ts=NOON - 2 * DAY),
        ]
    )
    snap = book.snapshot(NOON)
    route = snap.routes[LABEL]
    assert route.successes == pytest.approx(2.5)
    assert route.failures == 0
    assert route.samples == 3
    # ttfb 100 (w1), 300 (w1), 100 (w0.5); tps 50 (w1), 200 (w1), 50 (w0.5)
    assert route.ttfb_ms == pytest.approx((100 + 300 + 50) / 2.5)
    assert route.tokens_per_s == pytest.approx((50 + 200 + 25) / 2.5)
    assert snap.routes[OTHER].failures == pytest.approx(1.0)
    assert snap.routes[OTHER].successes == 0
    assert snap.routes["mistral/small"].failures == pytest.approx(1.0)
    assert snap.keys == {}  # the log has no key scopes
    assert snap.today[LABEL] == 2
    assert snap.today.get(OTHER, 0) == 0  # failures are not successes today


def test_seed_failed_hops_count_against_the_penalty() -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed([row(1, extra={"failed": [OTHER]})])
    snap = book.snapshot(NOON)
    assert snap.penalties[OTHER] == pytest.approx(1.0)  # an ordinary failure: the log says no more
    assert LABEL not in snap.penalties  # the success took its (zero) penalty lower


def test_seed_ignores_canceled_and_fusion_rows() -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed(
        [
            row(1, outcome="canceled", extra={"failed": [OTHER]}),
            row(2, extra={"fusion": {"panel": [LABEL, OTHER]}, "failed": [OTHER]}),
        ]
    )
    snap = book.snapshot(NOON)
    assert snap.routes == {}
    assert snap.penalties == {}


def test_seed_error_rows_count_only_their_failed_hops() -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed([row(1, outcome="error", status=502, extra={"failed": [LABEL, OTHER]})])
    snap = book.snapshot(NOON)
    assert snap.routes[LABEL].successes == 0
    assert snap.routes[LABEL].failures == pytest.approx(1.0)
    assert snap.routes[OTHER].failures == pytest.approx(1.0)


@pytest.mark.parametrize("route", [None, "", "auto", "cache"])
def test_seed_skips_rows_without_a_provider_model_route(route: str | None) -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed([row(1, route=route)])
    assert book.snapshot(NOON).routes == {}


@pytest.mark.parametrize("failed", ["groq/llama", {"groq/llama": 1}, [1, None, {"x": 1}], None])
def test_seed_ignores_unreadable_failed_trails(failed: Any) -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed([row(1, route=None, extra={"failed": failed})])
    assert book.snapshot(NOON).routes == {}


def test_seed_keeps_readable_labels_of_a_mixed_trail() -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed([row(1, route=None, extra={"failed": [7, OTHER, None]})])
    assert set(book.snapshot(NOON).routes) == {OTHER}


def test_seed_then_observe_add_up() -> None:
    book = StatsBook(ttl_s=0.0)
    book.seed([row(1)])
    book.observe(LABEL, KEY, ok=True, now=NOON + 1)
    snap = book.snapshot(NOON + 1)
    assert snap.routes[LABEL].successes == pytest.approx(2.0)
    assert snap.keys[KEY].successes == pytest.approx(1.0)


def test_seed_rows_need_no_order() -> None:
    ordered, shuffled = StatsBook(ttl_s=0.0), StatsBook(ttl_s=0.0)
    rows = [row(i, ts=NOON - i * DAY, extra={"failed": [OTHER]} if i % 2 else {}) for i in range(6)]
    ordered.seed(rows)
    shuffled.seed(list(reversed(rows)))
    a, b = ordered.snapshot(NOON), shuffled.snapshot(NOON)
    assert a.routes == b.routes
    assert a.today == b.today
