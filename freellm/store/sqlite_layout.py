"""The SQLite file's layout: schema and migrations, the statements that write it, how request-log rows
map to columns, and the pending write-behind batch. :mod:`freellm.store.sqlite` owns the behaviour."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from freellm.store.base import CooldownRecord, RequestLogRow

__all__ = [
    "INSERT_REQUEST",
    "MIGRATIONS",
    "REQUEST_COLUMNS",
    "RESPONSE_READ_TRIES",
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
    "request_row",
    "request_tuple",
]

SCHEMA_VERSION: Final = 3

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


def request_row(t: tuple[Any, ...]) -> RequestLogRow:
    return RequestLogRow(
        request_id=t[0],
        ts=t[1],
        surface=t[2],
        requested_model=t[3],
        route=t[4],
        status=t[5],
        stream=bool(t[6]),
        attempts=t[7],
        latency_ms=t[8],
        ttfb_ms=t[9],
        tokens_in=t[10],
        tokens_out=t[11],
        error_class=t[12],
        outcome=t[13],
        extra=orjson.loads(t[14]) if t[14] else {},
    )


@dataclass(slots=True)
class Loaded:
    cooldowns: list[tuple[str, float, str, str]]
    usage: list[tuple[str, int, int, int]]
    events: list[tuple[str, str, float]]
    settings: list[tuple[str, str]]
