"""``query_requests`` and ``request_analytics`` on every embedded backend: the same rows give the same
answers on MemoryStore (Python over its ring) and SQLiteStore (SQL over the file), and the expected
numbers below are worked out by hand from the fixture, not by either implementation."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from freellm.store.base import Analytics, RequestLogRow, RouteStats, StatusFilter, nearest_rank
from freellm.store.memory import MemoryStore
from freellm.store.shared import SharedSQLiteStore
from freellm.store.sqlite import SQLiteStore
from freellm.store.sqlite_layout import (
    ANALYTICS_CACHE_SAVED,
    ANALYTICS_FAILURES,
    ROUTE_AFTER,
    ROUTE_FIRST,
    ROUTE_LATENCY,
    ROUTE_TOTALS,
    ROUTE_TTFT,
    SCHEMA_VERSION,
    requests_query,
)

T0 = 1_700_000_000.0
A, B, C = "alpha/model-x", "beta/model-x", "gamma/model-x"
FIVE_XX = StatusFilter(((500, 599),))


def clock() -> float:
    """The stores' wall clock (retention prunes rows older than 30 days at open)."""
    return T0 + 100


def row(n: int, ts: float, route: str | None, **kw: Any) -> RequestLogRow:
    fields: dict[str, Any] = {
        "request_id": f"req-{n}",
        "ts": ts,
        "surface": "openai_chat",
        "requested_model": "auto",
        "route": route,
        "status": 200,
        "stream": False,
        "attempts": 1,
        "latency_ms": 100,
        "ttfb_ms": None,
        "tokens_in": 0,
        "tokens_out": 0,
        "error_class": None,
        "outcome": "success",
        "extra": {},
    }
    fields.update(kw)
    return RequestLogRow(**fields)


def fixture_rows() -> list[RequestLogRow]:
    """A window [T0, T0 + 100] with rows on three routes, the cache, a fusion turn, and rows outside."""
    return [
        # A: four answered requests (one is a fusion panel call, one needed a failover from B, one ended
        # in a committed stream error), two of them streamed.
        row(1, T0 + 1, A, latency_ms=300, tokens_in=10, tokens_out=5),
        row(2, T0 + 2, A, latency_ms=100, stream=True, ttfb_ms=70, tokens_in=20, tokens_out=6,
            attempts=2, extra={"failed": [B]}),
        row(3, T0 + 3, A, latency_ms=400, stream=True, ttfb_ms=50, tokens_in=30, tokens_out=7,
            outcome="error", error_class="stream_error"),
        row(4, T0 + 4, A, latency_ms=200, tokens_in=40, tokens_out=8, extra={"fusion_role": "p1"}),
        # B: two answered requests; B also failed twice (row 2 above, row 7 below).
        row(5, T0 + 5, B, latency_ms=30, stream=True, ttfb_ms=None, tokens_in=1, tokens_out=1),
        row(6, T0 + 6, B, latency_ms=10, tokens_in=2, tokens_out=2),
        # Nobody answered: B then C failed.
        row(7, T0 + 7, None, status=502, attempts=2, latency_ms=900, outcome="error",
            error_class="upstream_error", extra={"failed": [B, C]}),
        # Two cache hits, and what each saved.
        row(8, T0 + 8, "cache", latency_ms=1, attempts=0, extra={"tokens_saved": 100}),
        row(9, T0 + 9, "cache", latency_ms=3, attempts=0, stream=True, extra={"tokens_saved": 50}),
        # A fusion turn's top-level row: left out entirely (its calls have their own rows, e.g. row 4).
        row(10, T0 + 10, f"fusion({A}+{B} -> {A})", latency_ms=5000, tokens_in=999, extra={"failed": [C]}),
        row(11, T0 + 11, "fusion", status=502, outcome="error", extra={"failed": [C]}),
        # Outside the window, on both sides.
        row(12, T0 - 1, A, latency_ms=9999, extra={"failed": [C]}),
        row(13, T0 + 101, A, latency_ms=9999, extra={"failed": [C]}),
    ]


EXPECTED = Analytics(
    since=T0,
    now=T0 + 100,
    routes=(
        RouteStats(route=A, requests=4, successes=3, fallbacks=1, failures=0, p50_ms=200, p95_ms=400,
                   ttft_p50_ms=50, tokens_in=100, tokens_out=26),
        RouteStats(route=B, requests=2, successes=2, fallbacks=0, failures=2, p50_ms=10, p95_ms=30,
                   ttft_p50_ms=None, tokens_in=3, tokens_out=3),
        RouteStats(route="cache", requests=2, successes=2, fallbacks=0, failures=0, p50_ms=1, p95_ms=3,
                   ttft_p50_ms=None, tokens_in=0, tokens_out=0),
        RouteStats(route=C, requests=0, successes=0, fallbacks=0, failures=1, p50_ms=None, p95_ms=None,
                   ttft_p50_ms=None, tokens_in=0, tokens_out=0),
    ),
    cache_tokens_saved=150,
)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db", flush_interval_s=3600, clock=clock)
    await s.open()
    yield s
    await s.close()


async def fill(store: MemoryStore, rows: list[RequestLogRow]) -> None:
    for r in rows:
        await store.log_request(r)


# -- analytics ------------------------------------------------------------------------------------------


async def test_analytics_of_the_fixture(store: MemoryStore) -> None:
    await fill(store, fixture_rows())
    result = await store.request_analytics(T0, T0 + 100)
    assert result == EXPECTED
    by_route = {r.route: r for r in result.routes}
    assert by_route[A].success_rate == 3 / 4
    assert by_route[A].fallback_rate == 1 / 4
    assert by_route[B].success_rate == 2 / (2 + 2)
    assert by_route[B].fallback_rate == 0.0
    assert by_route[C].success_rate == 0.0
    assert by_route[C].fallback_rate is None


async def test_analytics_window_edges_are_inclusive(store: MemoryStore) -> None:
    await fill(store, fixture_rows())
    only_first = await store.request_analytics(T0 + 1, T0 + 1)
    assert [(r.route, r.requests, r.p50_ms) for r in only_first.routes] == [(A, 1, 300)]
    empty = await store.request_analytics(T0 + 200, T0 + 300)
    assert empty == Analytics(since=T0 + 200, now=T0 + 300, routes=(), cache_tokens_saved=0)


async def test_percentiles_are_nearest_rank(store: MemoryStore) -> None:
    # 21 latencies 1..21 (written in a shuffled order): p50 is rank ceil(10.5) = 11, p95 rank ceil(19.95) = 20.
    # The 20 streamed ones' first bytes 101..120: p50 is rank 10 → 110.
    order = [7, 3, 21, 1, 14, 9, 18, 2, 11, 5, 20, 16, 4, 13, 8, 19, 6, 12, 15, 10, 17]
    await fill(
        store,
        [
            row(i, T0 + i, A, latency_ms=v, stream=v <= 20, ttfb_ms=100 + v if v <= 20 else 5)
            for i, v in enumerate(order)
        ],
    )
    [stats] = (await store.request_analytics(T0, T0 + 100)).routes
    assert (stats.p50_ms, stats.p95_ms, stats.ttft_p50_ms) == (11, 20, 110)
    assert (nearest_rank(list(range(1, 22)), 50), nearest_rank(list(range(1, 22)), 95)) == (11, 20)
    assert nearest_rank([], 50) is None
    assert nearest_rank([7], 95) == 7


async def test_failure_only_routes_and_ordering(store: MemoryStore) -> None:
    await fill(
        store,
        [
            row(1, T0 + 1, B),
            row(2, T0 + 2, A, attempts=3, extra={"failed": [C, C]}),  # the same route twice: two failures
            row(3, T0 + 3, None, status=429, outcome="error", extra={"failed": ["zeta/m"]}),
        ],
    )
    result = await store.request_analytics(T0, T0 + 10)
    # most requests first, then most failures, then by label
    assert [(r.route, r.requests, r.failures) for r in result.routes] == [
        (A, 1, 0), (B, 1, 0), (C, 0, 2), ("zeta/m", 0, 1)
    ]


# -- the request listing --------------------------------------------------------------------------------


async def query(store: MemoryStore, **kw: Any) -> list[str]:
    args: dict[str, Any] = {"limit": 100, "status": None, "route": None, "since": None, **kw}
    return [r.request_id for r in await store.query_requests(**args)]


async def test_query_requests_newest_first_and_filters(store: MemoryStore) -> None:
    await fill(store, fixture_rows())
    everything = [f"req-{n}" for n in (13, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 12)]
    assert await query(store) == everything
    assert await query(store, limit=3) == everything[:3]
    assert await query(store, route=A) == ["req-13", "req-4", "req-3", "req-2", "req-1", "req-12"]
    assert await query(store, route="cache") == ["req-9", "req-8"]
    assert await query(store, route="alpha") == []  # exact, not a prefix
    assert await query(store, status=FIVE_XX) == ["req-11", "req-7"]
    assert await query(store, status=StatusFilter(((502, 502),))) == ["req-11", "req-7"]
    assert await query(store, status=StatusFilter(((429, 429), (502, 502)))) == ["req-11", "req-7"]
    assert await query(store, status=StatusFilter(((400, 499),))) == []
    assert await query(store, since=T0 + 9) == ["req-13", "req-11", "req-10", "req-9"]  # since is inclusive
    assert await query(store, route=A, since=T0 + 2, status=StatusFilter(((200, 299),)), limit=2) == [
        "req-13",
        "req-4",
    ]
    assert await query(store, limit=0) == []


async def test_query_requests_orders_by_start_time_then_write_order(store: MemoryStore) -> None:
    # A long request logs after a short one that started later; two rows share a start time.
    await fill(store, [row(1, T0 + 5, A), row(2, T0 + 1, A), row(3, T0 + 5, A), row(4, T0 + 3, B)])
    assert await query(store) == ["req-3", "req-1", "req-4", "req-2"]
    assert await query(store, route=A) == ["req-3", "req-1", "req-2"]


async def test_rows_come_back_whole(store: MemoryStore) -> None:
    rows = fixture_rows()
    await fill(store, rows)
    [got] = await store.query_requests(limit=1, status=None, route=B, since=T0 + 6)
    assert got == rows[5]


# -- SQLite specifics -----------------------------------------------------------------------------------


async def test_sqlite_answers_from_the_whole_file_not_the_ring(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "s.db", request_log_size=2, flush_interval_s=3600, clock=clock)
    await s.open()
    try:
        await fill(s, fixture_rows())  # 13 rows, 2 kept in memory, none flushed yet
        assert len(await s.query_requests(limit=1000, status=None, route=None, since=None)) == 13
        assert await s.request_analytics(T0, T0 + 100) == EXPECTED
    finally:
        await s.close()


async def test_sqlite_keeps_answering_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    s1 = SQLiteStore(path, clock=clock)
    await s1.open()
    await fill(s1, fixture_rows())
    await s1.close()
    s2 = SQLiteStore(path, clock=clock)
    await s2.open()
    try:
        assert await s2.request_analytics(T0, T0 + 100) == EXPECTED
        assert await query(s2, route="cache") == ["req-9", "req-8"]
    finally:
        await s2.close()


_INDEXES = ("requests_route", "requests_ts_status", "requests_failed")


def _indexes(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        con.close()


async def test_sqlite_migrates_a_version_3_database(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, clock=clock)
    await s1.open()
    await fill(s1, fixture_rows())
    await s1.close()
    con = sqlite3.connect(path)  # make it what version 3 wrote: none of the request-log indexes
    for name in _INDEXES:
        con.execute(f"DROP INDEX {name}")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    assert not _indexes(path) & set(_INDEXES)
    s2 = SQLiteStore(path, clock=clock)
    await s2.open()
    try:
        assert set(_INDEXES) <= _indexes(path)
        con = sqlite3.connect(path)
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        con.close()
        assert await s2.request_analytics(T0, T0 + 100) == EXPECTED
    finally:
        await s2.close()


async def test_sqlite_statements_run_on_index_plans(tmp_path: Path) -> None:
    """Every request-log statement searches an index (no full scan of ``requests``) — the plan the
    benchmark times on a million rows (docs/benchmarks.md)."""
    path = tmp_path / "s.db"
    s = SQLiteStore(path, clock=clock)
    await s.open()
    await fill(s, fixture_rows())
    await s.close()
    window = {"since": T0, "now": T0 + 100}
    per_route = {"route": A, **window}
    analytics: list[tuple[str, Any]] = [
        (ROUTE_FIRST, ("",)),
        (ROUTE_AFTER, (A,)),
        (ROUTE_TOTALS, per_route),
        (ROUTE_LATENCY, per_route),
        (ROUTE_TTFT, per_route),
        (ANALYTICS_FAILURES, window),
        (ANALYTICS_CACHE_SAVED, window),
    ]
    filters: list[dict[str, Any]] = [{}, {"route": A}, {"status": FIVE_XX}, {"route": A, "status": FIVE_XX, "since": T0}]
    listings = [requests_query(**{"limit": 10, "status": None, "route": None, "since": None, **kw}) for kw in filters]
    con = sqlite3.connect(path)
    try:
        for sql, params in analytics + listings:
            plan = [r[3] for r in con.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            on_requests = [step for step in plan if " requests " in f" {step} "]
            assert on_requests, (sql, plan)
            for step in on_requests:
                assert step.startswith("SEARCH requests USING") or (
                    step.startswith("SCAN requests USING") and "INDEX" in step
                ), (sql, plan)
        for sql, params in listings:  # newest first straight off the index: at most ties on ts are sorted
            plan = [r[3] for r in con.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert "USE TEMP B-TREE FOR ORDER BY" not in plan, (sql, plan)
    finally:
        con.close()


# -- several workers on one file --------------------------------------------------------------------------


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Callable[[int], SharedSQLiteStore]]:
    opened: list[SharedSQLiteStore] = []

    def make(index: int) -> SharedSQLiteStore:
        s = SharedSQLiteStore(
            tmp_path / "freellm.db", worker_id=f"w{index}", load_history=index == 0, sync_interval_s=3600,
            flush_interval_s=3600, clock=clock,
        )
        opened.append(s)
        return s

    yield make
    for s in opened:
        await s.close()


async def test_every_worker_sees_every_workers_flushed_rows(workers: Callable[[int], SharedSQLiteStore]) -> None:
    w0, w1 = workers(0), workers(1)
    await w0.open()
    await w1.open()
    rows = fixture_rows()
    await fill(w0, rows[::2])
    await fill(w1, rows[1::2])
    # w0's own pending rows are flushed by its query; w1's are on disk once w1 flushed them.
    assert len(await w0.query_requests(limit=100, status=None, route=None, since=None)) == 7
    await w1.flush()
    for w in (w0, w1):
        assert await w.request_analytics(T0, T0 + 100) == EXPECTED
        assert len(await w.query_requests(limit=100, status=None, route=None, since=None)) == 13


def test_the_benchmark_runs_on_a_small_log() -> None:
    """``python -m bench.analytics_cost`` (docs/benchmarks.md), on 2,000 rows instead of a million."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "bench.analytics_cost", "--rows", "2000", "--repeat", "1"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    for window in ("1h", "24h", "7d", "30d"):
        assert f"  {window:>4}:" in done.stdout
    assert "SEARCH requests USING COVERING INDEX requests_route" in done.stdout
    assert "appending" in done.stdout
