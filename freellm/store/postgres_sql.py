"""The PostgreSQL records schema of one namespace: migrations and the statements that read and write it.

:mod:`freellm.store.postgres` owns the behaviour. Every statement is built for one schema (the
namespace, quoted) by :class:`Statements`, so nothing depends on ``search_path`` and several gateways or
test runs share one database safely.

Layout (schema version 1)
-------------------------
* ``schema_migrations(version, applied_at)`` — one row per applied migration; the version is the max.
* ``requests`` — one column per :class:`~freellm.store.base.RequestLogRow` field, ``extra`` as ``jsonb``,
  and ``seq`` (an identity column): the order rows were written in, the tie-break of rows with the same
  ``ts`` (SQLite's ``rowid``).
* ``responses(id, expires_at, doc)`` — stored Responses API documents as JSON text (read whole by id,
  never searched, so ``text`` rather than ``jsonb`` saves parsing them on every write).
* ``settings(name, value, updated_at)`` — the admin overlay, the encrypted provider keys, learned
  limits, key health: stored exactly as the components write them.
* ``imports(source, imported_at, …)`` — what ``freellm db import`` already moved in, so a second import of
  the same SQLite data directory is refused.

Indexes (measured on 1M rows by ``python -m bench.analytics_cost --postgres URL``):
* ``requests_ts (ts, seq)`` — the unfiltered or status-filtered listing walks it backwards (newest first),
  the analytics read a window of it, retention deletes from its left edge.
* ``requests_route (route, ts, seq) INCLUDE (…)`` — a listing filtered by route walks one route's entries;
  the included columns are everything the per-route analytics read, so those can be index-only scans.
* ``requests_status (status, ts)`` — a status filter matching few rows (``5xx``, ``429``, or none) reads
  just those instead of walking the whole log backwards to find them.
* ``requests_failed (ts) WHERE jsonb_typeof(extra -> 'failed') = 'array'`` — only the rows with failed
  attempts, which the failure counts unnest.
* ``responses_expires (expires_at)`` — retention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from freellm.store.base import StatusFilter

__all__ = ["REQUEST_COLUMNS", "SCHEMA_VERSION", "Statements", "quote_ident"]

SCHEMA_VERSION: Final = 1

REQUEST_COLUMNS: Final = (
    "request_id",
    "ts",
    "surface",
    "requested_model",
    "route",
    "status",
    "stream",
    "attempts",
    "latency_ms",
    "ttfb_ms",
    "tokens_in",
    "tokens_out",
    "error_class",
    "outcome",
    "extra",
)
_COLUMNS: Final = ", ".join(REQUEST_COLUMNS)


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier, quoted (config already restricts a namespace to ``[a-z0-9_]``; quoting
    keeps a reserved word such as ``user`` usable and anything else harmless)."""
    return '"' + name.replace('"', '""') + '"'


def _migrations(s: str) -> dict[int, list[str]]:
    """version → the statements that bring schema ``s`` from the previous version to it."""
    return {
        1: [
            f"""CREATE TABLE {s}.requests (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id      text NOT NULL,
    ts              double precision NOT NULL,
    surface         text NOT NULL,
    requested_model text NOT NULL,
    route           text COLLATE "C",
    status          integer NOT NULL,
    stream          boolean NOT NULL,
    attempts        integer NOT NULL,
    latency_ms      integer NOT NULL,
    ttfb_ms         integer,
    tokens_in       bigint NOT NULL,
    tokens_out      bigint NOT NULL,
    error_class     text,
    outcome         text NOT NULL,
    extra           jsonb NOT NULL
)""",
            f"CREATE INDEX requests_ts ON {s}.requests (ts, seq)",
            f"""CREATE INDEX requests_route ON {s}.requests (route, ts, seq)
    INCLUDE (status, attempts, outcome, stream, latency_ms, ttfb_ms, tokens_in, tokens_out)""",
            f"CREATE INDEX requests_failed ON {s}.requests (ts) WHERE jsonb_typeof(extra -> 'failed') = 'array'",
            f"CREATE INDEX requests_status ON {s}.requests (status, ts)",
            f"""CREATE TABLE {s}.responses (
    id         text PRIMARY KEY,
    expires_at double precision NOT NULL,
    doc        text NOT NULL
)""",
            f"CREATE INDEX responses_expires ON {s}.responses (expires_at)",
            f"""CREATE TABLE {s}.settings (
    name       text PRIMARY KEY,
    value      text NOT NULL,
    updated_at double precision NOT NULL
)""",
            f"""CREATE TABLE {s}.imports (
    source      text PRIMARY KEY,
    imported_at double precision NOT NULL,
    requests    bigint NOT NULL,
    responses   bigint NOT NULL,
    settings    bigint NOT NULL
)""",
        ],
    }


_NOT_FUSION: Final = "(route <> 'fusion' AND left(route, 7) <> 'fusion(')"
"""Not a fusion turn's top-level row (its panel and judge calls have rows of their own)."""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement of the store, for the schema ``namespace``."""

    namespace: str

    @property
    def schema(self) -> str:
        return quote_ident(self.namespace)

    # -- migrations -------------------------------------------------------------------------------------
    def migrations(self) -> dict[int, list[str]]:
        return _migrations(self.schema)

    @property
    def create_schema(self) -> str:
        return f"CREATE SCHEMA IF NOT EXISTS {self.schema}"

    @property
    def create_versions(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.schema}.schema_migrations "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )

    @property
    def current_version(self) -> str:
        return f"SELECT COALESCE(MAX(version), 0) FROM {self.schema}.schema_migrations"

    @property
    def record_version(self) -> str:
        return f"INSERT INTO {self.schema}.schema_migrations (version) VALUES ($1)"

    @property
    def versions_table_exists(self) -> str:
        return "SELECT to_regclass($1) IS NOT NULL"

    # -- request log ------------------------------------------------------------------------------------
    @property
    def insert_request(self) -> str:
        marks = ", ".join(f"${i}" for i in range(1, len(REQUEST_COLUMNS) + 1))
        return f"INSERT INTO {self.schema}.requests ({_COLUMNS}) VALUES ({marks})"

    @property
    def recent(self) -> str:
        return f"SELECT {_COLUMNS} FROM {self.schema}.requests ORDER BY seq DESC LIMIT $1"

    def query(
        self, *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
    ) -> tuple[str, list[Any]]:
        """:meth:`StateStore.query_requests`: ``requests_route`` (with a route) or ``requests_ts``
        walked backwards, newest ``ts`` first (then newest written), stopping after ``limit`` rows."""
        where: list[str] = []
        params: list[Any] = []

        def param(value: Any) -> str:
            params.append(value)
            return f"${len(params)}"

        if route is not None:
            where.append(f"route = {param(route)}")
        if since is not None:
            where.append(f"ts >= {param(since)}")
        if status is not None:
            where.append(
                "(" + " OR ".join(f"status BETWEEN {param(lo)} AND {param(hi)}" for lo, hi in status.ranges) + ")"
            )
        sql = f"SELECT {_COLUMNS} FROM {self.schema}.requests"
        if where:
            sql += " WHERE " + " AND ".join(where)
        # With a route: the index's own order, a plain backward walk of requests_route.
        order = "route DESC, ts DESC, seq DESC" if route is not None else "ts DESC, seq DESC"
        return sql + f" ORDER BY {order} LIMIT {param(limit)}", params

    @property
    def prune_requests(self) -> str:
        return f"DELETE FROM {self.schema}.requests WHERE ts < $1"

    # -- analytics (docs/analytics.md; every statement takes $1 = since, $2 = now, inclusive) ----------
    # percentile_disc(p) is the first value whose rank reaches p·n (PostgreSQL computes the rank as
    # ceil(p·n)): the nearest-rank percentile analytics_of defines. The test suite compares it with the
    # SQLite store's integer arithmetic on the same rows.
    @property
    def route_stats(self) -> str:
        return f"""
SELECT route,
       COUNT(*),
       COUNT(*) FILTER (WHERE outcome = 'success'),
       COUNT(*) FILTER (WHERE attempts > 1),
       SUM(tokens_in),
       SUM(tokens_out),
       percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms),
       percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_ms),
       percentile_disc(0.5) WITHIN GROUP (ORDER BY ttfb_ms) FILTER (WHERE stream AND ttfb_ms IS NOT NULL)
FROM {self.schema}.requests
WHERE ts >= $1 AND ts <= $2 AND route IS NOT NULL AND {_NOT_FUSION}
GROUP BY route
"""

    @property
    def failures(self) -> str:
        """failed route label, failed attempts (the type test is the partial index's condition)."""
        return f"""
SELECT j.v #>> '{{}}', COUNT(*)
FROM {self.schema}.requests AS r, LATERAL jsonb_array_elements(r.extra -> 'failed') AS j(v)
WHERE r.ts >= $1 AND r.ts <= $2 AND jsonb_typeof(r.extra -> 'failed') = 'array'
  AND jsonb_typeof(j.v) = 'string' AND (r.route IS NULL OR {_NOT_FUSION})
GROUP BY 1
"""

    @property
    def cache_saved(self) -> str:
        """Σ extra.tokens_saved over the cache hits, integers only (``5.0`` or ``true`` is not one)."""
        return f"""
SELECT COALESCE(SUM((extra ->> 'tokens_saved')::numeric), 0)
FROM {self.schema}.requests
WHERE route = 'cache' AND ts >= $1 AND ts <= $2
  AND jsonb_typeof(extra -> 'tokens_saved') = 'number' AND (extra ->> 'tokens_saved') ~ '^-?[0-9]+$'
"""

    # -- stored responses -------------------------------------------------------------------------------
    @property
    def get_response(self) -> str:
        return f"SELECT expires_at, doc FROM {self.schema}.responses WHERE id = $1"

    @property
    def upsert_response(self) -> str:
        return (
            f"INSERT INTO {self.schema}.responses (id, expires_at, doc) VALUES ($1, $2, $3) "
            "ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at, doc = excluded.doc"
        )

    @property
    def delete_response(self) -> str:
        return f"DELETE FROM {self.schema}.responses WHERE id = $1 RETURNING expires_at"

    @property
    def prune_responses(self) -> str:
        return f"DELETE FROM {self.schema}.responses WHERE expires_at <= $1"

    # -- settings ---------------------------------------------------------------------------------------
    @property
    def all_settings(self) -> str:
        return f"SELECT name, value FROM {self.schema}.settings"

    @property
    def some_settings(self) -> str:
        return f"SELECT name, value FROM {self.schema}.settings WHERE name = ANY($1::text[])"

    @property
    def upsert_setting(self) -> str:
        return (
            f"INSERT INTO {self.schema}.settings (name, value, updated_at) VALUES ($1, $2, $3) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
        )

    @property
    def insert_setting_if_absent(self) -> str:
        return (
            f"INSERT INTO {self.schema}.settings (name, value, updated_at) VALUES ($1, $2, $3) "
            "ON CONFLICT (name) DO NOTHING RETURNING name"
        )

    # -- imports ----------------------------------------------------------------------------------------
    @property
    def find_import(self) -> str:
        return f"SELECT imported_at, requests, responses, settings FROM {self.schema}.imports WHERE source = $1"

    @property
    def record_import(self) -> str:
        return (
            f"INSERT INTO {self.schema}.imports (source, imported_at, requests, responses, settings) "
            "VALUES ($1, $2, $3, $4, $5)"
        )
