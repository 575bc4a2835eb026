"""What the request-log analytics cost on a big log: ``python -m bench.analytics_cost``.

Fills a temporary SQLite store (the gateway's own ``SQLiteStore``, through ``log_request`` and its
write-behind flushes) with ``--rows`` (1,000,000) request-log rows spread over 30 days across 20 routes —
with streams, cache hits carrying ``tokens_saved``, failovers carrying ``extra["failed"]``, exhausted
requests and fusion turns — then times ``request_analytics`` for every admin window and a few filtered
``query_requests`` calls, and prints each statement's ``EXPLAIN QUERY PLAN``. Last, the write cost of the
schema-4 indexes: inserting rows with and without them.

Timings are the median of ``--repeat`` runs after one warm-up run (the first, cold run is shown too).

``--postgres URL`` runs the same log and timings on the PostgreSQL records store instead (a throwaway
schema ``bench_…``, dropped afterwards), with each statement's ``EXPLAIN ANALYZE``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from freellm.admin.analytics import WINDOWS
from freellm.store.base import Analytics, RequestLogRow, StatusFilter
from freellm.store.memory import MemoryStore
from freellm.store.sqlite import SQLiteStore
from freellm.store.sqlite_layout import (
    ANALYTICS_CACHE_SAVED,
    ANALYTICS_FAILURES,
    INSERT_REQUEST,
    ROUTE_AFTER,
    ROUTE_LATENCY,
    ROUTE_TOTALS,
    ROUTE_TTFT,
    request_tuple,
    requests_query,
)

DAY_S = 86_400.0
SPAN_S = 30 * DAY_S
ROUTES = [f"provider{p}/model-{m}" for p in range(10) for m in ("a", "b")]
SURFACES = ["openai_chat", "anthropic_messages", "openai_responses", "gemini"]
BATCH = 20_000
NEW_INDEXES = ("requests_route", "requests_ts_status", "requests_failed")


def _row(rng: random.Random, i: int, ts: float) -> RequestLogRow:
    """One plausible row: 8 % cache hits, 6 % failovers, 1 % exhausted, 0.5 % fusion turns."""
    extra: dict[str, Any] = {"X-FreeLLM-Cache": "MISS"}
    roll = rng.random()
    stream = rng.random() < 0.6
    route: str | None = rng.choice(ROUTES)
    status, outcome, error_class, attempts = 200, "success", None, 1
    latency = int(rng.lognormvariate(6.3, 0.6))
    ttfb: int | None = int(latency * rng.uniform(0.1, 0.5)) if stream else None
    tokens_in, tokens_out = rng.randint(20, 4000), rng.randint(5, 800)
    if roll < 0.08:
        route, latency, ttfb, attempts = "cache", rng.randint(0, 3), None, 0
        extra = {"X-FreeLLM-Cache": "HIT", "tokens_saved": tokens_in + tokens_out}
        tokens_in = tokens_out = 0
    elif roll < 0.14:
        failed = rng.sample(ROUTES, rng.choice((1, 1, 1, 2)))
        extra["failed"] = failed
        attempts = len(failed) + 1
    elif roll < 0.15:
        extra["failed"] = rng.sample(ROUTES, 3)
        route, attempts, ttfb, tokens_in, tokens_out = None, 3, None, 0, 0
        status, outcome, error_class = rng.choice(((429, "error", "rate_limited"), (502, "error", "upstream_error")))
    elif roll < 0.155:
        route = "fusion(provider0/model-a+provider1/model-a -> provider2/model-a)"
        extra["fusion"] = {"members": 2}
    elif roll < 0.17:
        extra["fusion_role"] = "p1"
    if roll > 0.99:
        status, outcome, error_class = 200, "error", "stream_error"
    return RequestLogRow(
        request_id=f"{i:032x}",
        ts=ts,
        surface=rng.choice(SURFACES),
        requested_model="auto",
        route=route,
        status=status,
        stream=stream,
        attempts=attempts,
        latency_ms=latency,
        ttfb_ms=ttfb,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        error_class=error_class,
        outcome=outcome,
        extra=extra,
    )


async def _fill(store: MemoryStore, rows: int, now: float, seed: int) -> float:
    rng = random.Random(seed)
    started = time.perf_counter()
    step = SPAN_S / rows
    for i in range(rows):
        await store.log_request(_row(rng, i, now - SPAN_S + i * step))
        if (i + 1) % BATCH == 0:
            await store.flush()
    await store.flush()
    return time.perf_counter() - started


async def _timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, float, float, Any]:
    """(first run ms, median of ``repeat`` further runs ms — wall clock, then CPU of the process —,
    last result). The CPU time is the one to compare across runs on a machine with other load."""
    t = time.perf_counter()
    result = await fn()
    first = (time.perf_counter() - t) * 1000
    runs: list[float] = []
    cpu: list[float] = []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = await fn()
        runs.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return first, statistics.median(runs), statistics.median(cpu), result


def _plan(con: sqlite3.Connection, sql: str, params: Any) -> list[str]:
    return [f"    {row[3]}" for row in con.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()]


def _insert_cost(path: Path, now: float, rows: int, *, drop: bool) -> float:
    """CPU µs per row to append ``rows`` more rows (newer than any, as a running gateway does) in
    transactions of 500, the way the write-behind thread writes them."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        if drop:
            for name in NEW_INDEXES:
                con.execute(f"DROP INDEX IF EXISTS {name}")
        rng = random.Random(7)
        start = now + (rows if drop else 0) * 0.01
        tuples = [request_tuple(_row(rng, 10**9 + i, start + i * 0.01)) for i in range(rows)]
        started = time.process_time()
        for k in range(0, rows, 500):
            con.execute("BEGIN IMMEDIATE")
            con.executemany(INSERT_REQUEST, tuples[k : k + 500])
            con.execute("COMMIT")
        return (time.process_time() - started) / rows * 1e6
    finally:
        con.close()


async def _time_store(store: MemoryStore, now: float, repeat: int) -> None:
    """Time every admin analytics window and a few filtered listings on ``store``."""
    print(f"request_analytics (first run, then median of {repeat}):")
    for window, seconds in WINDOWS.items():

        def run_analytics(s: float = seconds) -> Awaitable[Analytics]:
            return store.request_analytics(now - s, now)

        first, median, cpu, result = await _timed(run_analytics, repeat)
        n = sum(r.requests for r in result.routes)
        print(f"  {window:>4}: {first:7.1f} ms first, {median:7.1f} ms median, {cpu:7.1f} ms CPU  "
              f"({n:,} answered rows, {len(result.routes)} routes)")
    print()
    queries: list[tuple[str, dict[str, Any]]] = [
        ("newest 100, no filter", {}),
        ("route, newest 100", {"route": ROUTES[3]}),
        ("route + since 7d, limit 1000", {"route": ROUTES[3], "since": now - 7 * DAY_S, "limit": 1000}),
        ("status 5xx, newest 100", {"status": StatusFilter(((500, 599),))}),
        ("route + status 5xx, newest 100", {"route": ROUTES[3], "status": StatusFilter(((500, 599),))}),
        ("since 1h, limit 1000", {"since": now - 3600, "limit": 1000}),
        ("status 418 (no row matches)", {"status": StatusFilter(((418, 418),))}),
    ]
    print(f"query_requests (first run, then median of {repeat}):")
    for name, kw in queries:
        call: dict[str, Any] = {"limit": 100, "status": None, "route": None, "since": None, **kw}

        def run_query(c: dict[str, Any] = call) -> Awaitable[list[RequestLogRow]]:
            return store.query_requests(**c)

        first, median, cpu, result = await _timed(run_query, repeat)
        print(f"  {name:32}: {first:6.2f} ms first, {median:6.2f} ms median, {cpu:6.2f} ms CPU  "
              f"({len(result)} rows)")


async def _postgres(url: str, rows: int, repeat: int, seed: int) -> None:
    """The same log and timings on a :class:`PostgresStore` (a throwaway schema, dropped at the end),
    with ``EXPLAIN ANALYZE`` of each statement."""
    import uuid

    import asyncpg

    from freellm.store.postgres import PostgresStore

    now = time.time()
    namespace = f"bench_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(url, namespace=namespace, retention_days=31, request_log_size=1000, clock=lambda: now)
    await store.open()
    conn = await asyncpg.connect(url)
    try:
        fill_s = await _fill(store, rows, now, seed)
        await conn.execute(f'VACUUM ANALYZE "{namespace}".requests')  # the visibility map: index-only scans
        size = await conn.fetchval(f"SELECT pg_total_relation_size('\"{namespace}\".requests')")
        print(f"PostgreSQL, schema {namespace}: filled {rows:,} rows in {fill_s:.1f} s "
              f"({rows / fill_s:,.0f} rows/s through log_request + flush), {size / 2**20:.0f} MiB with indexes")
        print()
        await _time_store(store, now, repeat)
        print()
        print("query plans (EXPLAIN ANALYZE):")
        sql = store._sql
        for name, statement, params in (
            ("per-route stats, 1h", sql.route_stats, [now - 3600, now]),
            ("per-route stats, 30d", sql.route_stats, [now - 30 * DAY_S, now]),
            ("failures, 30d", sql.failures, [now - 30 * DAY_S, now]),
            ("cache tokens saved, 30d", sql.cache_saved, [now - 30 * DAY_S, now]),
            ("requests, no filter", *sql.query(limit=100, status=None, route=None, since=None)),
            ("requests, status 5xx", *sql.query(limit=100, status=StatusFilter(((500, 599),)), route=None, since=None)),
            ("requests, route + status + since", *sql.query(
                limit=100, status=StatusFilter(((500, 599),)), route=ROUTES[3], since=now - DAY_S)),
        ):
            plan = await conn.fetch(f"EXPLAIN (ANALYZE, COSTS OFF) {statement}", *params)
            print(f"  {name}:")
            print("\n".join(f"    {r[0]}" for r in plan))
    finally:
        await store.close()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.analytics_cost")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--postgres", metavar="URL", help="run on a PostgresStore at this URL instead (a throwaway schema)"
    )
    args = parser.parse_args()
    if args.postgres:
        await _postgres(args.postgres, args.rows, args.repeat, args.seed)
        return

    now = time.time()
    with tempfile.TemporaryDirectory(prefix="freellm-analytics-") as tmp:
        path = Path(tmp) / "freellm.db"
        store = SQLiteStore(path, request_log_size=1000, clock=lambda: now)
        await store.open()
        try:
            fill_s = await _fill(store, args.rows, now, args.seed)
            size_mb = path.stat().st_size / 2**20
            print(f"filled {args.rows:,} rows over 30 days, {len(ROUTES)} routes + cache + fusion: "
                  f"{fill_s:.1f} s ({args.rows / fill_s:,.0f} rows/s through log_request + flush), "
                  f"{size_mb:.0f} MiB")
            print()
            await _time_store(store, now, args.repeat)
        finally:
            await store.close()

        con = sqlite3.connect(path)
        try:
            span = {"since": now - 30 * DAY_S, "now": now}
            per_route = {"route": ROUTES[3], **span}
            print()
            print("query plans (EXPLAIN QUERY PLAN), 30-day window:")
            for name, sql, params in (
                ("next route (skip-scan step)", ROUTE_AFTER, (ROUTES[3],)),
                ("per route: totals", ROUTE_TOTALS, per_route),
                ("per route: latency percentiles", ROUTE_LATENCY, per_route),
                ("per route: ttft percentile", ROUTE_TTFT, per_route),
                ("failures (json_each)", ANALYTICS_FAILURES, span),
                ("cache tokens saved", ANALYTICS_CACHE_SAVED, span),
            ):
                print(f"  {name}:")
                print("\n".join(_plan(con, sql, params)))
            for name, kw in (
                ("requests, no filter", {}),
                ("requests, status 5xx", {"status": StatusFilter(((500, 599),))}),
                ("requests, route + status + since", {
                    "route": ROUTES[3], "status": StatusFilter(((500, 599),)), "since": now - DAY_S}),
            ):
                call: dict[str, Any] = {"limit": 100, "status": None, "route": None, "since": None, **kw}
                sql, qparams = requests_query(**call)
                print(f"  {name}:")
                print("\n".join(_plan(con, sql, qparams)))
        finally:
            con.close()

        extra = min(50_000, max(1000, args.rows // 20))
        with_idx = _insert_cost(path, now, extra, drop=False)
        without = _insert_cost(path, now, extra, drop=True)
        print()
        print(f"appending {extra:,} more rows (500 per transaction): {with_idx:.1f} µs CPU per row with "
              f"the schema-4 indexes, {without:.1f} µs without them")


if __name__ == "__main__":
    asyncio.run(main())
