"""The SQLite file's layout: schema and migrations, the statements that write it, how request-log rows
map to columns, and the pending write-behind batch. :mod:`freellm.store.sqlite` owns the behaviour."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from freellm.store.base import CooldownRecord, RequestLogRow, StatusFilter

__all__ = [
    "ANALYTICS_CACHE_SAVED",
    "ANALYTICS_FAILURES",
    "INSERT_REQUEST",
    "MIGRATIONS",
    "REQUEST_COLUMNS",
    "RESPONSE_READ_TRIES",
    "ROUTE_AFTER",
    "ROUTE_FIRST",
    "ROUTE_LATENCY",
    "ROUTE_TOTALS",
    "ROUTE_TTFT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "UPSERT_CACHED",
    "UPSERT_COOLDOWN",
    "UPSERT_RESPONSE",
    "UPSERT_SETTING",
    "UPSERT_USAGE",
    "Batch",
    "Loaded",
    "RequestTuple",
    "request_tuple",
    "requests_query",
]

SCHEMA_VERSION: Final = 4

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cooldowns (
    scope  TEXT PRIMARY KEY,
    until  REAL NOT NULL,
    source TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    scope    TEXT NOT NULL,
    minute   INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    tokens   INTEGER NOT NULL,
    PRIMARY KEY (scope, minute)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS usage_minute ON usage (minute);
CREATE TABLE IF NOT EXISTS events (
    name  TEXT NOT NULL,
    scope TEXT NOT NULL,
    ts    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_key ON events (name, scope);
CREATE INDEX IF NOT EXISTS events_ts ON events (ts);
CREATE TABLE IF NOT EXISTS settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    request_id      TEXT NOT NULL,
    ts              REAL NOT NULL,
    surface         TEXT NOT NULL,
    requested_model TEXT NOT NULL,
    route           TEXT,
    status          INTEGER NOT NULL,
    stream          INTEGER NOT NULL,
    attempts        INTEGER NOT NULL,
    latency_ms      INTEGER NOT NULL,
    ttfb_ms         INTEGER,
    tokens_in       INTEGER NOT NULL,
    tokens_out      INTEGER NOT NULL,
    error_class     TEXT,
    outcome         TEXT NOT NULL,
    extra           TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts);
"""

MIGRATIONS: Final[dict[int, str]] = {
    2: """
CREATE TABLE IF NOT EXISTS responses (
    id         TEXT PRIMARY KEY,
    expires_at REAL NOT NULL,
    doc        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_expires ON responses (expires_at);
""",
    3: """
CREATE TABLE IF NOT EXISTS cache_entries (
    key        TEXT PRIMARY KEY,
    expires_at REAL NOT NULL,
    stored_at  REAL NOT NULL,
    doc        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_entries_stored ON cache_entries (stored_at);
""",
    4: """
CREATE INDEX IF NOT EXISTS requests_route ON requests
    (route, ts, status, attempts, outcome, stream, latency_ms, ttfb_ms, tokens_in, tokens_out);
CREATE INDEX IF NOT EXISTS requests_ts_status ON requests (ts, status);
CREATE INDEX IF NOT EXISTS requests_failed ON requests (ts) WHERE json_type(extra, '$.failed') = 'array';
""",
}
"""version → the statements that bring a database of the previous version to it."""

REQUEST_COLUMNS: Final = (
    "request_id, ts, surface, requested_model, route, status, stream, attempts, latency_ms, ttfb_ms, "
    "tokens_in, tokens_out, error_class, outcome, extra"
)
INSERT_REQUEST: Final = f"INSERT INTO requests ({REQUEST_COLUMNS}) VALUES ({', '.join('?' * 15)})"
UPSERT_USAGE: Final = (
    "INSERT INTO usage (scope, minute, requests, tokens) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (scope, minute) DO UPDATE SET "
    "requests = requests + excluded.requests, tokens = tokens + excluded.tokens"
)
UPSERT_COOLDOWN: Final = (
    "INSERT INTO cooldowns (scope, until, source, reason) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (scope) DO UPDATE SET until = excluded.until, source = excluded.source, "
    "reason = excluded.reason"
)
UPSERT_SETTING: Final = (
    "INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)
UPSERT_RESPONSE: Final = (
    "INSERT INTO responses (id, expires_at, doc) VALUES (?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at, doc = excluded.doc"
)
UPSERT_CACHED: Final = (
    "INSERT INTO cache_entries (key, expires_at, stored_at, doc) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at, stored_at = excluded.stored_at, "
    "doc = excluded.doc"
)
RESPONSE_READ_TRIES: Final = 3

# -- the request-log queries of the admin API (docs/analytics.md) -------------------------------------------
# Schema 4's indexes all grow at their right edge (ts-ordered, or ts-ordered per route), so a write costs
# little more than before; none is ordered by latency (that one would be written at random places).
# * requests_route covers every column the analytics read: per route, a range on (route, ts) — no table
#   row is read, and the latency/ttfb histograms sort integers of one route only (SQLite's sorter costs
#   ~1 µs per row when it sorts (route text, value) over a whole window; per-route integers are cheaper).
# * requests_ts_status: the unfiltered or status-filtered listing walks it backwards, newest first.
# * requests_failed: only the rows with failed attempts, for json_each over extra.failed.
# Percentiles are nearest-rank: the smallest value v with cum(v)·100 >= p·n, cum(v) the count of values
# <= v, over the (value, count) histogram ranked with window functions. Every statement takes :since and
# :now (inclusive); fusion turns' top-level rows are left out (their calls have rows of their own).
# docs/benchmarks.md ("Analytics over the request log") shows the plans and the timings on 1M rows.
_IN_WINDOW: Final = "ts >= :since AND ts <= :now"

ROUTE_FIRST: Final = "SELECT MIN(route) FROM requests INDEXED BY requests_route WHERE route >= ?"
ROUTE_AFTER: Final = "SELECT MIN(route) FROM requests INDEXED BY requests_route WHERE route > ?"
"""A skip-scan over the distinct routes: one index seek each (``ROUTE_FIRST`` also jumps over fusion)."""

ROUTE_TOTALS: Final = f"""
SELECT COUNT(*), SUM(outcome = 'success'), SUM(attempts > 1), SUM(tokens_in), SUM(tokens_out)
FROM requests INDEXED BY requests_route
WHERE route = :route AND {_IN_WINDOW}
"""
"""requests, successes, fallbacks, tokens_in, tokens_out of one route."""


def _percentiles(value: str, where: str) -> str:
    return f"""
WITH hist AS (
    SELECT {value} AS v, COUNT(*) AS c
    FROM requests INDEXED BY requests_route
    WHERE route = :route AND {_IN_WINDOW}{where}
    GROUP BY v
), ranked AS (
    SELECT v, SUM(c) OVER (ORDER BY v ROWS UNBOUNDED PRECEDING) AS cum, SUM(c) OVER () AS n
    FROM hist
)
SELECT MIN(CASE WHEN cum * 100 >= 50 * n THEN v END), MIN(CASE WHEN cum * 100 >= 95 * n THEN v END)
FROM ranked
"""


ROUTE_LATENCY: Final = _percentiles("latency_ms", "")
"""p50, p95 of one route's latency_ms."""
ROUTE_TTFT: Final = _percentiles("ttfb_ms", " AND stream = 1 AND ttfb_ms IS NOT NULL")
"""p50 (and p95) of one route's streamed requests' ttfb_ms."""

ANALYTICS_FAILURES: Final = f"""
SELECT j.value, COUNT(*)
FROM requests INDEXED BY requests_failed, json_each(requests.extra, '$.failed') AS j
WHERE {_IN_WINDOW} AND json_type(extra, '$.failed') = 'array' AND j.type = 'text'
  AND (route IS NULL OR (route <> 'fusion' AND substr(route, 1, 7) <> 'fusion('))
GROUP BY j.value
"""
"""failed route label, failed attempts (the type test is the partial index's condition, verbatim)."""

ANALYTICS_CACHE_SAVED: Final = f"""
SELECT COALESCE(SUM(json_extract(extra, '$.tokens_saved')), 0)
FROM requests INDEXED BY requests_route
WHERE route = 'cache' AND {_IN_WINDOW} AND json_type(extra, '$.tokens_saved') = 'integer'
"""

def requests_query(
    *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
) -> tuple[str, list[Any]]:
    """The statement (and its parameters) of :meth:`StateStore.query_requests`: ``requests_route``
    (with a route) or ``requests_ts_status`` walked backwards, newest ``ts`` first, filtered on the index
    entries themselves and stopping after ``limit`` rows (rows with the same ``ts``: newest written
    first, a sort of those few only)."""
    where: list[str] = []
    params: list[Any] = []
    if route is not None:
        where.append("route = ?")
        params.append(route)
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    if status is not None:
        where.append("(" + " OR ".join("status BETWEEN ? AND ?" for _ in status.ranges) + ")")
        for lo, hi in status.ranges:
            params += (lo, hi)
    index = "requests_route" if route is not None else "requests_ts_status"
    sql = f"SELECT {REQUEST_COLUMNS} FROM requests INDEXED BY {index}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    params.append(limit)
    return sql + " ORDER BY ts DESC, rowid DESC LIMIT ?", params


RequestTuple = tuple[
    str, float, str, str, str | None, int, int, int, int, int | None, int, int, str | None, str, str
]


@dataclass(slots=True)
class Batch:
    """Mutations not yet on disk. Swapped out whole on each flush."""

    cooldowns: dict[str, CooldownRecord | None] = field(default_factory=dict)
    """scope → record to upsert, or None to delete. Last state wins."""
    usage: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    """(scope, minute) → [requests, tokens] increments."""
    events: list[tuple[str, str, float | None]] = field(default_factory=list)
    """(name, scope, ts) to insert, or (name, scope, None) to clear that name/scope — in order."""
    settings: dict[str, str] = field(default_factory=dict)
    requests: deque[RequestTuple] = field(default_factory=deque)
    responses: dict[str, tuple[float, str] | None] = field(default_factory=dict)
    """response id → (expires_at, document JSON) to upsert, or None to delete. Last state wins."""
    cached: dict[str, tuple[float, float, str] | None] = field(default_factory=dict)
    """cache key → (expires_at, stored_at, entry JSON) to upsert, or None to delete. Last state wins."""
    cache_cleared: bool = False
    """Delete every cache entry first (then apply ``cached``)."""

    def __bool__(self) -> bool:
        return bool(
            self.cooldowns
            or self.usage
            or self.events
            or self.settings
            or self.requests
            or self.responses
            or self.cached
            or self.cache_cleared
        )

    def merge_newer(self, newer: Batch, max_requests: int) -> None:
        """Fold ``newer`` (written after this one) into this batch, keeping write order."""
        self.cooldowns.update(newer.cooldowns)
        for key, (requests, tokens) in newer.usage.items():
            acc = self.usage.get(key)
            if acc is None:
                self.usage[key] = [requests, tokens]
            else:
                acc[0] += requests
                acc[1] += tokens
        self.events.extend(newer.events)
        self.settings.update(newer.settings)
        self.responses.update(newer.responses)
        if newer.cache_cleared:
            self.cached.clear()
            self.cache_cleared = True
        self.cached.update(newer.cached)
        self.requests.extend(newer.requests)
        while len(self.requests) > max_requests:
            self.requests.popleft()


def request_tuple(row: RequestLogRow) -> RequestTuple:
    try:
        extra = orjson.dumps(row.extra, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        extra = "{}"
    return (
        row.request_id,
        row.ts,
        row.surface,
        row.requested_model,
        row.route,
        row.status,
        1 if row.stream else 0,
        row.attempts,
        row.latency_ms,
        row.ttfb_ms,
        row.tokens_in,
        row.tokens_out,
        row.error_class,
        row.outcome,
        extra,
    )


@dataclass(slots=True)
class Loaded:
    cooldowns: list[tuple[str, float, str, str]]
    usage: list[tuple[str, int, int, int]]
    events: list[tuple[str, str, float]]
    settings: list[tuple[str, str]]
