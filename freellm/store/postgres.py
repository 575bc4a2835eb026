"""``PostgresStore``: the durable records of a fleet of replicas in one PostgreSQL schema.

It implements the *records* half of :class:`~freellm.store.base.StateStore` — the operations
:class:`~freellm.store.composite.CompositeStore` sends to ``records``: the request log and its queries,
stored Responses objects, and settings (the admin overlay, the encrypted provider keys, learned limits,
key health). The hot-state methods are :class:`MemoryStore`'s, unused: the composite sends those to the
hot half (Redis, or the local SQLite store).

Design
------
* **One schema per namespace** (``storage.namespace``), created and migrated by :meth:`open` inside a
  transaction holding ``pg_advisory_xact_lock`` keyed on the namespace, so replicas starting together on
  an empty namespace queue up: the first creates the tables, the others find them at the current version.
  ``freellm db upgrade`` runs the same step on its own (:func:`migrate`).
* **Request log: written behind, bounded.** ``log_request`` appends to a deque (and to the in-memory ring,
  the fallback of ``recent_requests``) — no I/O on the reply path. A background task writes the deque
  every ``flush_interval_s`` with one ``COPY``. While PostgreSQL fails, rows wait there; past
  ``max_pending_requests`` the oldest are dropped and counted in :attr:`PostgresStore.dropped_requests`
  (logged). A row PostgreSQL rejects as data (it cannot ever be written) is dropped and counted in
  :attr:`PostgresStore.rejected_requests`, never retried forever.
* **Responses and settings: written through.** The client's next turn, or another replica's settings
  watcher, may read them at once, so ``put_response``/``delete_response``/``set_setting`` return once the
  row is committed. These writes go through one lock (with the settings re-read of
  :meth:`refresh_settings`), so they reach PostgreSQL in the order they were made.
* **Reads.** ``get_response`` reads PostgreSQL (another replica may have stored or deleted it), keeping the
  documents it saw in memory — the only answer left during an outage. Settings are loaded at ``open()``
  and kept current by ``refresh_settings``, which the settings watcher polls every second.
* **Faults.** A connection failure (refused, reset, silent past ``op_timeout_s``) marks the store
  *buffering* — :meth:`health` says ``{"records": "buffering"}`` and the transition is logged once. Request
  rows, responses and settings written meanwhile are kept in memory and written when PostgreSQL answers
  again; reads answer from memory, or raise :class:`~freellm.errors.RecordsUnavailable` (a 503
  ``records_unavailable``) for what only PostgreSQL holds. While buffering, the flush task probes every
  ``flush_interval_s`` and nothing else waits for a dead server. A refused login or an unknown database at
  ``open()`` is not an outage but a configuration error: :class:`~freellm.errors.RecordsStoreError`, naming
  the cause, never the password.
* ``asyncpg`` is imported by :meth:`open` only, so a gateway without ``storage.postgres_url`` never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from typing import Any, Final, Protocol, cast
from urllib.parse import urlsplit, urlunsplit

import orjson

from freellm.errors import RecordsStoreError, RecordsUnavailable
from freellm.store.base import (
    Analytics,
    RequestLogRow,
    RouteStats,
    StatusFilter,
    analytics_with_failures,
    request_row,
)
from freellm.store.memory import DAY_S, MemoryStore
from freellm.store.postgres_sql import REQUEST_COLUMNS, SCHEMA_VERSION, Statements

__all__ = ["SCHEMA_VERSION", "PostgresStore", "migrate_schema", "redact_url"]

log = logging.getLogger(__name__)

_HEALTH_BUFFERING: Final = {"records": "buffering"}
_REQUEST_TABLE: Final = "requests"


# -- the narrow part of asyncpg this module uses (asyncpg ships no type information) ---------------------
class _Conn(Protocol):
    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str: ...

    async def executemany(self, command: str, args: Any, *, timeout: float | None = None) -> None: ...

    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Any]: ...

    async def fetchrow(self, query: str, *args: Any, timeout: float | None = None) -> Any: ...

    async def fetchval(self, query: str, *args: Any, timeout: float | None = None) -> Any: ...

    async def copy_records_to_table(
        self,
        table_name: str,
        *,
        records: Any,
        columns: Sequence[str] | None = None,
        schema_name: str | None = None,
        timeout: float | None = None,
    ) -> str: ...

    def transaction(self, *, isolation: str | None = None, readonly: bool = False) -> Any: ...

    async def close(self, *, timeout: float | None = None) -> None: ...


class _Pool(Protocol):
    def acquire(self, *, timeout: float | None = None) -> Any: ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


def redact_url(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host:5432/db``), for messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rpartition("@")[2]
        user = parts.username or ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
    except ValueError:
        return "postgresql://(unparsable URL)"


def _lock_key(namespace: str) -> int:
    """The advisory-lock key of a namespace's migrations: a signed 64-bit hash (stable across versions)."""
    digest = hashlib.sha256(b"freellm-migrate:" + namespace.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _text(value: str) -> str:
    """PostgreSQL text cannot hold NUL: it becomes U+FFFD (a log row must never be unwritable)."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _opt_text(value: str | None) -> str | None:
    return None if value is None else _text(value)


def _extra_json(extra: dict[str, Any]) -> str:
    try:
        text = orjson.dumps(extra, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return "{}"
    # jsonb refuses the \u0000 escape (an escaped backslash followed by "u0000" is changed too: harmless).
    return text.replace("\\u0000", "\\ufffd") if "\\u0000" in text else text


_RequestRecord = tuple[
    str, float, str, str, str | None, int, bool, int, int, int | None, int, int, str | None, str, str
]


def _record(row: RequestLogRow) -> _RequestRecord:
    return (
        _text(row.request_id),
        float(row.ts),
        _text(row.surface),
        _text(row.requested_model),
        _opt_text(row.route),
        int(row.status),
        bool(row.stream),
        int(row.attempts),
        int(row.latency_ms),
        None if row.ttfb_ms is None else int(row.ttfb_ms),
        int(row.tokens_in),
        int(row.tokens_out),
        _opt_text(row.error_class),
        _text(row.outcome),
        _extra_json(row.extra),
    )


def _decode_doc(text: str) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        log.warning("freellm records: a stored response is not valid JSON; ignoring it")
        return None
    return doc if isinstance(doc, dict) else None


class PostgresStore(MemoryStore):
    """Durable records in the PostgreSQL schema ``namespace`` of ``url`` (see the module).

    ``url`` is a libpq URL (``postgresql://user:password@host:5432/database``); it is never logged, and
    messages show it with the password redacted.
    """

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        retention_days: int,
        flush_interval_s: float = 0.5,
        prune_interval_s: float = 3600.0,
        max_pending_requests: int = 100_000,
        request_log_size: int = 10_000,
        response_cache_size: int = 1_000,
        op_timeout_s: float = 2.0,
        connect_timeout_s: float = 5.0,
        query_timeout_s: float = 120.0,
        pool_size: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(request_log_size=request_log_size, response_cap=response_cache_size)
        self._url = url
        self.namespace = namespace
        self._sql = Statements(namespace)
        self._retention_s = retention_days * DAY_S
        self._flush_interval_s = flush_interval_s
        self._prune_interval_s = prune_interval_s
        self._max_pending = max(1, max_pending_requests)
        self._op_timeout_s = op_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._query_timeout_s = query_timeout_s
        self._pool_size = max(2, pool_size)
        self._clock = clock
        self._pool: _Pool | None = None
        self._pg: Any = None
        """The asyncpg module, once :meth:`open` imported it."""
        self._task: asyncio.Task[None] | None = None
        self._closed = False

        self._log_pending: deque[_RequestRecord] = deque()
        """Request rows not yet written, oldest first (bounded by ``max_pending_requests``)."""
        self._log_lock = asyncio.Lock()
        self._small_lock = asyncio.Lock()
        """Serialises the written-through records (responses, settings) and the settings re-read."""
        self._pending_settings: dict[str, str] = {}
        """Settings set here and not yet in PostgreSQL (a write in flight, or one that failed)."""
        self._pending_responses: dict[str, tuple[float, str] | None] = {}
        """response id → (expires_at, JSON) to upsert, or None to delete, not yet in PostgreSQL."""
        self._inflight_responses: dict[str, tuple[float, str] | None] = {}
        """The pending responses a write is committing right now (still the newest state of those ids)."""
        self._buffering = False
        self._outage_dropped = 0

        self.dropped_requests = 0
        """Request-log rows dropped because the buffer was full while PostgreSQL failed (since start)."""
        self.rejected_requests = 0
        """Request-log rows PostgreSQL refused as data (e.g. an out-of-range number): dropped, logged."""
        self.schema_version: int | None = None
        """The schema's version after :meth:`open` (and what it was before: :attr:`migrated_from`)."""
        self.migrated_from: int | None = None

    # -- health ---------------------------------------------------------------------------------------
    def health(self) -> dict[str, str]:
        """``{"records": "buffering"}`` while PostgreSQL fails (writes wait in memory), else ``{}``."""
        return dict(_HEALTH_BUFFERING) if self._buffering else {}

    @property
    def pending_requests(self) -> int:
        """Request-log rows waiting to be written."""
        return len(self._log_pending)

    def _outage(self, exc: BaseException, what: str) -> None:
        if not self._buffering:
            self._buffering = True
            self._outage_dropped = self.dropped_requests
            log.warning(
                "freellm records: PostgreSQL unreachable while %s (%s: %s); buffering the request log "
                "(up to %d rows) and writing it when PostgreSQL answers again",
                what,
                type(exc).__name__,
                self._message(exc),
                self._max_pending,
            )

    def _recovered(self) -> None:
        if self._buffering:
            self._buffering = False
            lost = self.dropped_requests - self._outage_dropped
            log.warning(
                "freellm records: PostgreSQL answers again; buffered records written%s",
                f", {lost} request-log rows dropped while it was away (buffer full)" if lost else "",
            )

    def _is_outage(self, exc: BaseException) -> bool:
        """A failure of the server or the way to it (retry later), not of the statement or its data."""
        if isinstance(exc, (OSError, TimeoutError)):
            return True
        pg = self._pg
        if pg is None:
            return False
        e = pg.exceptions
        return isinstance(
            exc,
            (
                e.PostgresConnectionError,
                e.InterfaceError,
                e.OperatorInterventionError,
                e.InsufficientResourcesError,
                e.InternalClientError,
            ),
        )

    def _is_data_error(self, exc: BaseException) -> bool:
        """A value that can never be written (out of range, refused by a type): retrying cannot help."""
        if isinstance(exc, (OverflowError, ValueError, TypeError)):
            return True
        pg = self._pg
        return pg is not None and isinstance(
            exc, (pg.exceptions.DataError, pg.exceptions.IntegrityConstraintViolationError)
        )

    def _message(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        with contextlib.suppress(ValueError):
            password = urlsplit(self._url).password
            if password:
                text = text.replace(password, "***")
        return text

    # -- lifecycle ------------------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect, create or migrate the schema, load the settings and start the write-behind task.

        Raises :class:`RecordsStoreError` (a clear one-line cause, no password) when PostgreSQL refuses
        the login, has no such database, cannot be reached, or holds a newer schema."""
        if self._pool is not None:
            return
        if self._closed:
            raise RuntimeError("PostgresStore cannot be reopened after close(); create a new one")
        pool = await self._connect()
        try:
            async with pool.acquire(timeout=self._connect_timeout_s) as conn:
                self.migrated_from, self.schema_version = await migrate_schema(conn, self._sql)
                self._settings.update(
                    {r[0]: r[1] for r in await conn.fetch(self._sql.all_settings, timeout=self._query_timeout_s)}
                )
                await self._prune(conn, self._clock())
        except RecordsStoreError:
            pool.terminate()
            raise
        except Exception as exc:
            pool.terminate()
            raise self._start_error(exc) from None
        self._pool = pool
        self._task = asyncio.create_task(self._flush_loop(), name=f"freellm-postgres-flush:{self.namespace}")

    async def _connect(self) -> _Pool:
        try:
            self._pg = importlib.import_module("asyncpg")
        except ImportError:
            raise RecordsStoreError(
                "storage.postgres_url needs the asyncpg package: pip install 'freellm[postgres]'"
            ) from None
        try:
            pool = await self._pg.create_pool(
                self._url,
                min_size=1,
                max_size=self._pool_size,
                timeout=self._connect_timeout_s,
                command_timeout=self._query_timeout_s,
                # JIT compiling costs ~100 ms per analytics statement and saves less than that here.
                server_settings={"application_name": "freellm", "jit": "off"},
            )
        except Exception as exc:
            raise self._start_error(exc) from None
        return cast(_Pool, pool)

    def _start_error(self, exc: BaseException) -> RecordsStoreError:
        where = f"PostgreSQL at {redact_url(self._url)}"
        e = self._pg.exceptions if self._pg is not None else None
        detail = self._message(exc)
        if e is not None and isinstance(exc, e.InvalidPasswordError):
            cause = f"{where} refused the login (wrong password): {detail}"
        elif e is not None and isinstance(exc, e.InvalidAuthorizationSpecificationError):
            cause = f"{where} refused the login: {detail}"
        elif e is not None and isinstance(exc, e.InvalidCatalogNameError):
            cause = f"{where}: unknown database ({detail})"
        elif e is not None and isinstance(exc, e.InsufficientPrivilegeError):
            cause = f"{where}: the user may not create or change schema {self.namespace!r} ({detail})"
        elif isinstance(exc, (OSError, TimeoutError)) or (e is not None and self._is_outage(exc)):
            cause = f"{where} cannot be reached ({type(exc).__name__}: {detail})"
        else:
            cause = f"{where}: {type(exc).__name__}: {detail}"
        return RecordsStoreError(f"storage.postgres_url: {cause}")

    async def close(self) -> None:
        """Stop the flusher, write what is pending (a few seconds at most) and close the pool. Idempotent."""
        if self._closed:
            return
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        pool = self._pool
        if pool is None:
            return
        try:
            if self._buffering:
                await self._probe()
            await asyncio.wait_for(self._write_all(), timeout=max(5.0, self._op_timeout_s))
        except Exception as exc:
            log.error("freellm records: could not write the last records at shutdown: %s", self._message(exc))
        finally:
            self._pool = None
            left = len(self._log_pending) + len(self._pending_settings) + len(self._pending_responses)
            if left:
                log.error("freellm records: %d records were never written to PostgreSQL", left)
            try:
                await asyncio.wait_for(pool.close(), timeout=5.0)
            except Exception:
                pool.terminate()

    async def flush(self) -> None:
        """Write everything pending; returns once it (and every earlier write) is committed.

        Raises :class:`RecordsUnavailable` when PostgreSQL cannot be reached: the records stay pending and
        the write-behind task writes them once it answers."""
        if self._pool is None:
            return
        await self._write_all()
        if self._buffering:
            raise RecordsUnavailable()

    async def _write_all(self) -> None:
        await self._write_small()
        await self._write_log()

    async def _flush_loop(self) -> None:
        next_prune = time.monotonic() + self._prune_interval_s
        while True:
            await asyncio.sleep(self._flush_interval_s)
            try:
                if self._buffering:
                    await self._probe()  # the one place that waits on a server that may be gone
                if not self._buffering:
                    await self._write_all()
                if time.monotonic() >= next_prune and not self._buffering:
                    next_prune = time.monotonic() + self._prune_interval_s
                    async with self._conn() as conn:
                        await self._prune(conn, self._clock())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._is_outage(exc):
                    self._outage(exc, "pruning")
                else:
                    log.exception("freellm records: write-behind to PostgreSQL failed; will retry")

    async def _probe(self) -> None:
        try:
            async with self._conn() as conn:
                await conn.fetchval("SELECT 1", timeout=self._op_timeout_s)
        except Exception as exc:
            if not self._is_outage(exc):
                raise
            return
        self._recovered()

    @contextlib.asynccontextmanager
    async def _conn(self, timeout: float | None = None) -> AsyncIterator[_Conn]:
        """A pooled connection; acquiring it (connecting, when the pool must) counts against the timeout."""
        pool = self._pool
        if pool is None:
            raise RecordsUnavailable("The records store is closed.")
        async with pool.acquire(timeout=timeout or self._op_timeout_s) as conn:
            yield cast(_Conn, conn)

    async def _prune(self, conn: _Conn, now: float) -> None:
        await conn.execute(self._sql.prune_requests, now - self._retention_s, timeout=self._query_timeout_s)
        await conn.execute(self._sql.prune_responses, now, timeout=self._query_timeout_s)

    # -- request log ----------------------------------------------------------------------------------
    async def log_request(self, row: RequestLogRow) -> None:
        """Queued for the write-behind task (and kept in the in-memory ring); never waits for PostgreSQL."""
        self._requests.append(row)
        pending = self._log_pending
        pending.append(_record(row))
        if len(pending) > self._max_pending:
            pending.popleft()
            self.dropped_requests += 1
            if self.dropped_requests == self._outage_dropped + 1:
                log.warning(
                    "freellm records: the request-log buffer is full (%d rows); dropping the oldest rows",
                    self._max_pending,
                )

    async def _write_log(self) -> None:
        """Write the pending request rows in one COPY; on an outage put them back in front (bounded)."""
        async with self._log_lock:
            if not self._log_pending:
                return
            if self._buffering:
                return  # the flush task writes them once its probe succeeds
            batch = list(self._log_pending)
            self._log_pending.clear()
            try:
                async with self._conn() as conn:
                    try:
                        await conn.copy_records_to_table(
                            _REQUEST_TABLE,
                            records=batch,
                            columns=REQUEST_COLUMNS,
                            schema_name=self.namespace,
                            timeout=max(self._op_timeout_s, len(batch) / 20_000),
                        )
                    except Exception as exc:
                        if not self._is_data_error(exc):
                            raise
                        await self._write_rows_one_by_one(conn, batch)
            except Exception as exc:
                self._requeue(batch)  # an outage, or a failure of the server's: retried by the next flush
                if not self._is_outage(exc):
                    raise
                self._outage(exc, "writing the request log")
                return
            self._recovered()

    async def _write_rows_one_by_one(self, conn: _Conn, batch: list[_RequestRecord]) -> None:
        """A COPY refused for its data: insert row by row, dropping (and counting) the rows refused."""
        for record in batch:
            try:
                await conn.execute(self._sql.insert_request, *record, timeout=self._op_timeout_s)
            except Exception as exc:
                if not self._is_data_error(exc):
                    raise
                self.rejected_requests += 1
                log.error(
                    "freellm records: PostgreSQL refused request-log row %s (%s); dropped it",
                    record[0],
                    self._message(exc),
                )

    def _requeue(self, batch: list[_RequestRecord]) -> None:
        pending = self._log_pending
        pending.extendleft(reversed(batch))
        excess = len(pending) - self._max_pending
        if excess > 0:
            for _ in range(excess):
                pending.popleft()
            self.dropped_requests += excess

    async def recent_requests(self, limit: int = 100) -> list[RequestLogRow]:
        """Newest written first, over every replica's rows; this replica's ring while PostgreSQL is away."""
        if limit <= 0:
            return []
        try:
            await self.flush()
            async with self._conn() as conn:
                rows = await conn.fetch(self._sql.recent, limit, timeout=self._query_timeout_s)
        except RecordsUnavailable:
            return await super().recent_requests(limit)
        except Exception as exc:
            if not self._is_outage(exc):
                raise
            self._outage(exc, "reading the request log")
            return await super().recent_requests(limit)
        return [request_row(r) for r in rows]

    async def query_requests(
        self, *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
    ) -> list[RequestLogRow]:
        """Every replica's rows of the retention period, after writing this replica's pending ones.
        Raises :class:`RecordsUnavailable` while PostgreSQL cannot be reached."""
        if limit <= 0:
            return []
        sql, params = self._sql.query(limit=limit, status=status, route=route, since=since)
        rows = await self._read(sql, params)
        return [request_row(r) for r in rows]

    async def request_analytics(self, since: float, now: float) -> Analytics:
        """docs/analytics.md, in SQL over every replica's rows, in one snapshot."""
        await self.flush()
        try:
            t = self._query_timeout_s
            async with self._conn(t) as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                per_route = await conn.fetch(self._sql.route_stats, since, now, timeout=t)
                failed = await conn.fetch(self._sql.failures, since, now, timeout=t)
                saved = await conn.fetchval(self._sql.cache_saved, since, now, timeout=t)
        except Exception as exc:
            raise self._read_error(exc) from None
        failures: dict[str, int] = {r[0]: int(r[1]) for r in failed}
        stats = [
            RouteStats(
                route=r[0],
                requests=int(r[1]),
                successes=int(r[2]),
                fallbacks=int(r[3]),
                failures=0,
                p50_ms=r[6],
                p95_ms=r[7],
                ttft_p50_ms=r[8],
                tokens_in=int(r[4]),
                tokens_out=int(r[5]),
            )
            for r in per_route
        ]
        return analytics_with_failures(stats, failures, since=since, now=now, cache_tokens_saved=saved)

    async def _read(self, sql: str, params: list[Any]) -> list[Any]:
        await self.flush()
        try:
            async with self._conn(self._query_timeout_s) as conn:
                return await conn.fetch(sql, *params, timeout=self._query_timeout_s)
        except Exception as exc:
            raise self._read_error(exc) from None

    def _read_error(self, exc: Exception) -> Exception:
        if isinstance(exc, RecordsUnavailable):
            return exc
        if self._is_outage(exc):
            self._outage(exc, "reading the request log")
            return RecordsUnavailable()
        return exc

    # -- settings: loaded at open(), written through, re-read by refresh_settings ---------------------
    async def set_setting(self, name: str, value: str) -> None:
        """This process sees it at once; PostgreSQL (every replica) once this returns — or, while it is
        unreachable, as soon as it answers again (the setting waits in memory, never lost by a reply)."""
        self._settings[name] = value
        self._pending_settings[name] = value
        await self._write_small()

    async def refresh_settings(self, names: Collection[str]) -> dict[str, str]:
        """One SELECT by primary key. A setting this process changed and has not yet written keeps this
        process's value; while PostgreSQL is unreachable nothing changes (``{}``)."""
        if self._pool is None or not names:
            return {}
        async with self._small_lock:
            if self._buffering:
                return {}
            try:
                async with self._conn() as conn:
                    rows = await conn.fetch(self._sql.some_settings, sorted(set(names)), timeout=self._op_timeout_s)
            except Exception as exc:
                if not self._is_outage(exc):
                    raise
                self._outage(exc, "re-reading settings")
                return {}
        changed: dict[str, str] = {}
        for name, value in rows:
            if name in self._pending_settings or self._settings.get(name) == value:
                continue
            self._settings[name] = value
            changed[name] = value
        return changed

    # -- stored responses: written through, read from PostgreSQL ---------------------------------------
    async def put_response(self, response_id: str, doc: dict[str, Any], expires_at: float) -> None:
        """Committed before this returns (the next turn may land on another replica); while PostgreSQL
        is unreachable it is kept here and written when it answers again."""
        encoded = _text(orjson.dumps(doc).decode())  # first: a document that cannot be stored is not kept
        self._put_response(response_id, doc, expires_at)
        self._pending_responses[response_id] = (expires_at, encoded)
        await self._write_small()

    async def get_response(self, response_id: str, now: float) -> dict[str, Any] | None:
        """PostgreSQL's answer (another replica may have stored or deleted it). While it is unreachable:
        this replica's copy, else :class:`RecordsUnavailable` — unknown is not the same as absent."""
        for unsent in (self._pending_responses, self._inflight_responses):
            if response_id in unsent:
                entry = unsent[response_id]
                return None if entry is None or entry[0] <= now else _decode_doc(entry[1])
        if self._pool is None:
            return self._get_response(response_id, now)
        if self._buffering:
            return self._local_or_unavailable(response_id, now)
        try:
            async with self._conn() as conn:
                row = await conn.fetchrow(self._sql.get_response, response_id, timeout=self._op_timeout_s)
        except Exception as exc:
            if not self._is_outage(exc):
                raise
            self._outage(exc, "reading a stored response")
            return self._local_or_unavailable(response_id, now)
        if row is None or row[0] <= now:
            self._responses.pop(response_id, None)
            return None
        doc = _decode_doc(row[1])
        if doc is not None:
            self._put_response(response_id, doc, row[0])
        return doc

    def _local_or_unavailable(self, response_id: str, now: float) -> dict[str, Any]:
        doc = self._get_response(response_id, now)
        if doc is None:
            raise RecordsUnavailable()
        return doc

    async def delete_response(self, response_id: str, now: float) -> bool:
        """Deleted from PostgreSQL before this returns. While it is unreachable, a response this replica
        holds is deleted here and in PostgreSQL later; any other id raises :class:`RecordsUnavailable`."""
        local = self._get_response(response_id, now)
        unsent = self._pending_responses.get(response_id, ...)
        self._responses.pop(response_id, None)
        if self._pool is None:
            return local is not None
        self._pending_responses[response_id] = None
        existed = await self._write_small(delete_id=response_id, now=now)
        if existed is not None:
            return existed
        if local is not None or (isinstance(unsent, tuple) and unsent[0] > now):
            return True
        self._pending_responses.pop(response_id, None)  # nothing known to delete: do not queue it
        raise RecordsUnavailable()

    async def _write_small(self, *, delete_id: str | None = None, now: float = 0.0) -> bool | None:
        """Write the pending settings and responses in one transaction (in the order they were made:
        one lock). With ``delete_id``: also whether that response existed (None: PostgreSQL is away)."""
        async with self._small_lock:
            if self._pool is None or not (self._pending_settings or self._pending_responses):
                return None
            if self._buffering:
                return None  # kept pending: the flush task writes them once its probe succeeds
            settings, self._pending_settings = self._pending_settings, {}
            responses, self._pending_responses = self._pending_responses, {}
            self._inflight_responses = responses
            stamp = self._clock()
            ops: list[tuple[str, tuple[Any, ...]]] = [
                (self._sql.upsert_setting, (name, value, stamp)) for name, value in settings.items()
            ]
            for rid, entry in responses.items():
                if rid == delete_id:
                    continue
                if entry is None:
                    ops.append((self._sql.delete_response, (rid,)))
                else:
                    ops.append((self._sql.upsert_response, (rid, entry[0], entry[1])))
            existed: bool | None = None
            try:
                async with self._conn() as conn:
                    # One statement (the usual case: one response, one setting) needs no transaction.
                    single = len(ops) + (delete_id is not None) == 1
                    async with contextlib.nullcontext() if single else conn.transaction():
                        for statement, args in ops:
                            await conn.execute(statement, *args, timeout=self._op_timeout_s)
                        if delete_id is not None:
                            gone = await conn.fetchval(self._sql.delete_response, delete_id, timeout=self._op_timeout_s)
                            existed = gone is not None and gone > now
            except Exception as exc:
                if not self._is_outage(exc):
                    # Refused for what it is (it never could be written): not retried forever.
                    log.error("freellm records: PostgreSQL refused a settings/response write: %s", self._message(exc))
                    raise
                # Put them back behind anything newer set meanwhile (the newer state wins).
                self._pending_settings = {**settings, **self._pending_settings}
                self._pending_responses = {**responses, **self._pending_responses}
                self._outage(exc, "writing settings or stored responses")
                return None
            finally:
                self._inflight_responses = {}
            self._recovered()
            return existed


# -- migrations (also run by `freellm db upgrade`) --------------------------------------------------------
async def migrate_schema(conn: _Conn, sql: Statements) -> tuple[int, int]:
    """Create or migrate ``sql``'s schema, serialised across processes by an advisory lock on the
    namespace (held until the transaction ends). Returns (version before, version after); raises
    :class:`RecordsStoreError` for a schema newer than this freellm."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(sql.namespace))
        await conn.execute(sql.create_schema)
        await conn.execute(sql.create_versions)
        before = int(await conn.fetchval(sql.current_version))
        if before > SCHEMA_VERSION:
            raise RecordsStoreError(
                f"storage.postgres_url: schema {sql.namespace!r} has version {before}, newer than this "
                f"freellm ({SCHEMA_VERSION}); upgrade freellm"
            )
        migrations = sql.migrations()
        for version in range(before + 1, SCHEMA_VERSION + 1):
            for statement in migrations[version]:
                await conn.execute(statement)
            await conn.execute(sql.record_version, version)
    return before, max(before, SCHEMA_VERSION)
