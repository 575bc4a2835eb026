"""``SQLiteStore``: the embedded default — :class:`MemoryStore` for every read, SQLite written behind.

Design
------
* **Memory is authoritative.** Every read (``usage``, ``get_cooldown``, ``count_events`` …) is the
  in-memory answer; SQLite is only there so a restart keeps cooldowns, the 24 h counters, events,
  settings and the request log. Leases are in-flight state and are never persisted.
* **Write-behind.** A mutation updates memory and appends to a *pending batch* on the event-loop thread —
  a dict update or a list append, no I/O. Cooldowns and settings are coalesced per key (last state wins);
  usage is coalesced per (scope, minute) into increments; events and request rows keep their order.
* **Flushing.** A background task swaps the pending batch for an empty one every ``flush_interval_s``
  (0.5 s) and hands it to **one dedicated database thread**, which writes it in one transaction;
  ``flush()`` and ``close()`` do the same on demand. The thread runs writes in submission order, so
  ``await flush()`` returns only once everything written before the call is on disk, and a caller being
  cancelled never loses or reorders a batch (the write is shielded and finishes on the thread). A failed
  write is kept by the thread and merged in front of the next batch (the next flush retries it); the
  background task logs the error, ``flush()``/``close()`` raise it.
* **Why stdlib ``sqlite3`` on a private one-thread executor rather than aiosqlite.** aiosqlite also runs a
  ``sqlite3`` connection on its own thread, but costs one thread hop (a queue put plus a future wake-up
  on the loop) per *statement*; a flush here is a handful of ``executemany`` calls and a commit, done in
  *one* hop. Measured on this machine (WAL, synchronous=NORMAL): a typical 0.5 s batch of 5 request rows
  + 5 usage upserts took 98 µs vs 351 µs with aiosqlite ``executemany``; 1 000 + 1 000 took 4.4 ms vs
  5.5 ms (and 172 ms with aiosqlite statement by statement). A private executor rather than
  ``asyncio.to_thread``'s shared default pool also means a burst of DNS lookups or other ``to_thread``
  users can't delay a flush, and the one thread runs writes strictly in submission order.
  The request path itself pays ~2 µs per logged row (a tuple and one ``orjson.dumps``) and a dict
  update per usage record; the whole router sequence (cooldown, usage, check, lease, release, record)
  measured 3.8 µs on ``MemoryStore`` and 6.2 µs here with ``log_request`` and flushing running.
* **Layout.** ``meta(schema_version)``, ``cooldowns``, ``usage`` (per scope and minute: the same
  buckets the 24 h window uses, so a day of a busy key is ≤ 1 440 rows), ``events``, ``settings`` and
  ``requests`` (one column per :class:`RequestLogRow` field, ``extra`` as JSON), and since schema
  version 2 ``responses`` (stored Responses API documents as JSON, with their expiry), since version 3
  ``cache_entries`` (the response cache's non-stream bodies; the cache service holds them in memory, so
  this store only writes them behind and reads them back at start-up), since version 4 the indexes of
  the admin API's request-log queries (:mod:`freellm.store.sqlite_layout`). WAL journal,
  ``synchronous=NORMAL``: a killed process loses what it had not flushed yet (≤ ``flush_interval_s`` of
  writes; a clean shutdown loses nothing), a power cut may also lose the last commit — acceptable for
  this state.
* **Retention.** ``open()`` and then the background task once an hour delete usage older than 24 h,
  events older than ``event_retention_s``, expired cooldowns, expired stored responses and request rows
  older than ``retention_days``.
* **Stored responses** are the one exception to "memory is authoritative": they can be large and live
  for weeks, so memory keeps only the newest ``response_cache_size`` of them (plus the pending batch) and
  a miss reads the row on the database thread. Reads are queued behind every earlier write, so they
  always see it. Puts and deletes are written through (``put_response`` returns once the row is
  committed), so worker processes sharing the file see each other's responses at once; a response
  another worker *deleted* may still be served from this worker's memory until it leaves it.
* **Request-log queries** (``query_requests``, ``request_analytics``) flush, then run on a second,
  read-only connection with its own thread: WAL lets it read while the database thread writes, so a
  30-day analytics query (~1 s on a million rows) never delays a flush or a written-through response.
* **Schema versions.** ``meta.schema_version`` names the layout. ``SCHEMA`` is version 1; each later
  version is a migration in ``MIGRATIONS``, applied in order (in the opening transaction) to a database
  that is older. A database newer than this code is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from freellm.store.base import (
    FUSION_ROUTE,
    Analytics,
    CooldownRecord,
    RequestLogRow,
    RouteStats,
    StatusFilter,
    analytics_with_failures,
    request_row,
)
from freellm.store.memory import DAY_S, MemoryStore
from freellm.store.sqlite_layout import (
    ANALYTICS_CACHE_SAVED,
    ANALYTICS_FAILURES,
    INSERT_REQUEST,
    MIGRATIONS,
    REQUEST_COLUMNS,
    RESPONSE_READ_TRIES,
    ROUTE_AFTER,
    ROUTE_FIRST,
    ROUTE_LATENCY,
    ROUTE_TOTALS,
    ROUTE_TTFT,
    SCHEMA,
    SCHEMA_VERSION,
    UPSERT_CACHED,
    UPSERT_COOLDOWN,
    UPSERT_RESPONSE,
    UPSERT_SETTING,
    UPSERT_USAGE,
    Batch,
    Loaded,
    request_tuple,
    requests_query,
)

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class SQLiteStore(MemoryStore):
    """Memory-authoritative store persisted write-behind to one SQLite file (``<data_dir>/freellm.db``).

    ``clock`` is the wall clock used for retention and reloading (tests inject one); the ``now`` arguments
    of the protocol methods are used for everything else, as in :class:`MemoryStore`.
    """

    def __init__(
        self,
        path: Path,
        *,
        retention_days: int = 30,
        event_retention_s: float = DAY_S,
        flush_interval_s: float = 0.5,
        prune_interval_s: float = 3600.0,
        max_pending_requests: int = 100_000,
        request_log_size: int = 10_000,
        event_cap: int = 10_000,
        response_cache_size: int = 1_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            request_log_size=request_log_size, event_cap=event_cap, response_cap=response_cache_size
        )
        self.path = Path(path)
        self._retention_s = retention_days * DAY_S
        self._event_retention_s = event_retention_s
        self._flush_interval_s = flush_interval_s
        self._prune_interval_s = prune_interval_s
        self._max_pending_requests = max_pending_requests
        self._clock = clock
        self._pending = Batch()
        """Mutations since the last flush (event-loop thread only)."""
        self._failed: Batch | None = None
        """A batch whose write failed, retried first by the next write (database thread only)."""
        self._last_write: asyncio.Future[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._con: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._cache_stamp = 0.0
        """``stored_at`` of the newest cache entry written (see :meth:`put_cached`)."""
        self._response_writes = 0
        """Bumped by every put/delete of a stored response (a disk read racing one is retried)."""
        self._reader: ThreadPoolExecutor | None = None
        """The request-log queries' own thread and read-only connection (opened on first use), so a long
        analytics query never holds up the write-behind thread."""
        self._reader_con: sqlite3.Connection | None = None

    # -- lifecycle ------------------------------------------------------------------------------------
    async def open(self) -> None:
        """Create the schema, prune old rows, load the state that outlives a restart, start flushing."""
        if self._executor is not None:
            return
        if self._closed:
            raise RuntimeError("SQLiteStore cannot be reopened after close(); create a new one")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"freellm-sqlite-{id(self):x}")
        now = self._clock()
        try:
            loaded = await self._run(self._open_sync, now)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise
        self._load(loaded, now)
        self._task = asyncio.create_task(self._flush_loop(), name=f"freellm-sqlite-flush:{self.path}")

    async def close(self) -> None:
        """Stop the flusher, write everything pending and close the file. Idempotent."""
        if self._closed:
            return
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            # Safe at any point: a write already handed to the database thread completes there.
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(reader, self._close_reader_sync)
            reader.shutdown(wait=False)
        if self._executor is None:
            return
        try:
            await self.flush()
        finally:
            with contextlib.suppress(Exception):
                await self._run(self._close_sync)
            self._executor.shutdown(wait=False)
            self._executor = None

    async def flush(self) -> None:
        """Write everything pending to disk; returns once it (and any earlier write) is committed.

        Raises the database error if the write fails; the batch is then kept and retried by the next
        flush, merged in order with what was written after it.
        """
        executor = self._executor
        if executor is None:
            return
        if self._pending or self._failed is not None:
            batch, self._pending = self._pending, Batch()
            write = asyncio.wrap_future(executor.submit(self._write_sync, batch))
            write.add_done_callback(_retrieve)  # its error is raised to the awaiter, if any is left
            self._last_write = write
        last = self._last_write
        if last is not None:
            # Shielded: a caller cancelled meanwhile must not cancel a write still queued on the thread
            # (the batch would be lost). The single-thread executor keeps writes in submission order, so
            # the newest write completing means every earlier one has too.
            await asyncio.shield(last)

    async def _flush_loop(self) -> None:
        next_prune = time.monotonic() + self._prune_interval_s
        while True:
            await asyncio.sleep(self._flush_interval_s)
            try:
                if self._pending or self._failed is not None:
                    await self.flush()
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + self._prune_interval_s
                    await self._run(self._prune_sync, self._clock())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("freellm state store: write-behind to %s failed; will retry", self.path)

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        executor = self._executor
        if executor is None:
            raise RuntimeError("SQLiteStore is not open")
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    # -- mutations: memory first, then queue for disk ------------------------------------------------
    async def set_cooldown(self, scope: str, record: CooldownRecord) -> None:
        self._pending.cooldowns[scope] = self._set_cooldown(scope, record)

    async def clear_cooldown(self, scope: str) -> None:
        self._cooldowns.pop(scope, None)
        self._pending.cooldowns[scope] = None

    async def record_usage(self, scope: str, tokens: int, now: float) -> None:
        self._record_usage(scope, tokens, now)
        key = (scope, int(now // 60.0))
        acc = self._pending.usage.get(key)
        if acc is None:
            self._pending.usage[key] = [1, tokens]
        else:
            acc[0] += 1
            acc[1] += tokens

    async def add_event(self, name: str, scope: str, now: float, window_s: float) -> int:
        n = self._add_event(name, scope, now, window_s)
        self._pending.events.append((name, scope, now))
        return n

    async def clear_events(self, name: str, scope: str) -> None:
        # Every success clears its key's ladder/streak events: only touch the disk when there were some
        # (memory holds every event the file has, loaded at open()).
        if self._events.pop((name, scope), None) is not None:
            self._pending.events.append((name, scope, None))

    async def set_setting(self, name: str, value: str) -> None:
        self._settings[name] = value
        self._pending.settings[name] = value

    async def refresh_settings(self, names: Collection[str]) -> dict[str, str]:
        """One SELECT on the reader thread (after flushing this process's own writes); a name written
        here since (still pending) keeps this process's value."""
        if self._executor is None or not names:
            return {}
        wanted = sorted(set(names))
        marks = ", ".join("?" * len(wanted))
        rows = await self._read(self._select_sync, f"SELECT name, value FROM settings WHERE name IN ({marks})", wanted)
        changed: dict[str, str] = {}
        for name, value in rows:
            if name in self._pending.settings or self._settings.get(name) == value:
                continue
            self._settings[name] = value
            changed[name] = value
        return changed

    async def log_request(self, row: RequestLogRow) -> None:
        self._requests.append(row)
        pending = self._pending.requests
        pending.append(request_tuple(row))
        if len(pending) > self._max_pending_requests:  # only when the disk keeps failing
            pending.popleft()

    async def put_response(self, response_id: str, doc: dict[str, Any], expires_at: float) -> None:
        """Cached in memory and written through at once (not after ``flush_interval_s``): another
        worker process on the same database may be asked for it by the client's very next request."""
        encoded = orjson.dumps(doc).decode()  # first: a document that cannot be stored is not cached
        self._put_response(response_id, doc, expires_at)
        self._pending.responses[response_id] = (expires_at, encoded)
        self._response_writes += 1
        await self.flush()

    async def get_response(self, response_id: str, now: float) -> dict[str, Any] | None:
        """From memory (newest responses and the pending batch), else from the database."""
        for _ in range(RESPONSE_READ_TRIES):
            doc = self._get_response(response_id, now)
            if doc is not None:
                return doc
            if response_id in self._pending.responses:
                return _decode_response(self._pending.responses[response_id], now)
            if self._executor is None:
                return None
            writes = self._response_writes
            row = await self._run(self._get_response_sync, response_id)
            if writes == self._response_writes:
                doc = _decode_response(row, now)
                if doc is not None and row is not None:
                    self._put_response(response_id, doc, row[0])
                return doc
            # A put or delete ran while the row was read: the answer may be stale, read again.
        return self._get_response(response_id, now)

    async def delete_response(self, response_id: str, now: float) -> bool:
        """Written through at once, like :meth:`put_response`."""
        existed = await self.get_response(response_id, now) is not None
        self._responses.pop(response_id, None)
        self._pending.responses[response_id] = None
        self._response_writes += 1
        await self.flush()
        return existed

    # -- response cache: written behind, read back only at start-up (the cache service is in memory) ----
    async def put_cached(self, key: str, doc: dict[str, Any], expires_at: float) -> None:
        # Strictly increasing, so the start-up LRU order is the store order even within one clock tick.
        self._cache_stamp = max(self._clock(), self._cache_stamp + 1e-6)
        self._pending.cached[key] = (expires_at, self._cache_stamp, orjson.dumps(doc).decode())

    async def delete_cached(self, keys: list[str]) -> None:
        for key in keys:
            self._pending.cached[key] = None

    async def clear_cached(self) -> None:
        self._pending.cached.clear()
        self._pending.cache_cleared = True
        await self.flush()

    async def load_cached(self, now: float, limit: int) -> list[tuple[str, float, dict[str, Any]]]:
        if limit <= 0 or self._executor is None:
            return []
        await self.flush()
        rows = await self._run(self._load_cached_sync, now, limit)
        out: list[tuple[str, float, dict[str, Any]]] = []
        for key, expires_at, text in rows:
            doc = _decode_response((expires_at, text), now)
            if doc is not None:
                out.append((key, expires_at, doc))
        return out

    async def recent_requests(self, limit: int = 100) -> list[RequestLogRow]:
        """Newest first: from the in-memory ring when it holds enough rows, else from the database."""
        if limit <= 0:
            return []
        if len(self._requests) >= limit or self._executor is None:
            return await super().recent_requests(limit)
        await self.flush()
        rows = await self._run(self._recent_sync, limit)
        return [request_row(t) for t in rows]

    async def query_requests(
        self, *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
    ) -> list[RequestLogRow]:
        """From the database (every row of the retention period), after flushing what is pending."""
        if limit <= 0:
            return []
        if self._executor is None:
            return await super().query_requests(limit=limit, status=status, route=route, since=since)
        sql, params = requests_query(limit=limit, status=status, route=route, since=since)
        rows = await self._read(self._select_sync, sql, params)
        return [request_row(t) for t in rows]

    async def request_analytics(self, since: float, now: float) -> Analytics:
        """SQL over the database (every row of the retention period), after flushing what is pending.
        A worker of ``serve --workers N`` sees every worker's rows as of their last flush."""
        if self._executor is None:
            return await super().request_analytics(since, now)
        return await self._read(self._analytics_sync, since, now)

    async def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Flush, then run ``fn`` on the reader thread (which sees every committed write: WAL)."""
        await self.flush()
        if self._closed:
            raise RuntimeError("SQLiteStore is closed")
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"freellm-sqlite-read-{id(self):x}")
        return await asyncio.get_running_loop().run_in_executor(self._reader, fn, *args)

    # -- on the reader thread -------------------------------------------------------------------------
    def _reader_connection(self) -> sqlite3.Connection:
        con = self._reader_con
        if con is None:
            con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            con.execute("PRAGMA query_only = ON")
            con.execute("PRAGMA busy_timeout = 5000")
            self._reader_con = con
        return con

    def _close_reader_sync(self) -> None:
        con, self._reader_con = self._reader_con, None
        if con is not None:
            con.close()

    def _select_sync(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        return self._reader_connection().execute(sql, params).fetchall()

    def _analytics_sync(self, since: float, now: float) -> Analytics:
        con = self._reader_connection()
        window = {"since": since, "now": now}
        stats: list[RouteStats] = []
        con.execute("BEGIN")  # one snapshot for every statement (other workers may be writing)
        try:
            for route in _routes(con):
                params = {"route": route, **window}
                requests, successes, fallbacks, tokens_in, tokens_out = con.execute(ROUTE_TOTALS, params).fetchone()
                if not requests:
                    continue
                p50, p95 = con.execute(ROUTE_LATENCY, params).fetchone()
                ttft_p50, _ = con.execute(ROUTE_TTFT, params).fetchone()
                stats.append(
                    RouteStats(
                        route=route,
                        requests=requests,
                        successes=successes,
                        fallbacks=fallbacks,
                        failures=0,
                        p50_ms=p50,
                        p95_ms=p95,
                        ttft_p50_ms=ttft_p50,
                        tokens_in=tokens_in,
                        tokens_out=tokens_out,
                    )
                )
            failures: dict[str, int] = dict(con.execute(ANALYTICS_FAILURES, window).fetchall())
            saved = con.execute(ANALYTICS_CACHE_SAVED, window).fetchone()[0]
        finally:
            con.execute("COMMIT")
        return analytics_with_failures(stats, failures, since=since, now=now, cache_tokens_saved=saved)

    # -- on the database thread -----------------------------------------------------------------------
    def _open_sync(self, now: float) -> Loaded:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA busy_timeout=5000")
            con.execute("BEGIN IMMEDIATE")
        except BaseException:
            con.close()
            raise
        self._con = con
        return self._init_sync(now)

    def _init_sync(self, now: float) -> Loaded:
        con = self._con
        assert con is not None
        try:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = 1 if row is None else int(row[0])
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} has schema version {row[0]}, newer than this freellm ({SCHEMA_VERSION})"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target].split(";"):
                    if statement.strip():
                        con.execute(statement)
            if row is None or version != SCHEMA_VERSION:
                con.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )
            self._prune_in_txn(con, now)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            con.close()
            self._con = None
            raise
        min_minute = int((now - DAY_S) // 60.0)
        return Loaded(
            cooldowns=con.execute(
                "SELECT scope, until, source, reason FROM cooldowns WHERE until > ?", (now,)
            ).fetchall(),
            usage=con.execute(
                "SELECT scope, minute, requests, tokens FROM usage WHERE minute >= ? ORDER BY scope, minute",
                (min_minute,),
            ).fetchall(),
            events=con.execute(
                "SELECT name, scope, ts FROM events WHERE ts > ? ORDER BY ts",
                (now - self._event_retention_s,),
            ).fetchall(),
            settings=con.execute("SELECT name, value FROM settings").fetchall(),
        )

    def _prune_in_txn(self, con: sqlite3.Connection, now: float) -> None:
        # Keep one extra minute bucket: the 24 h window counts a bucket until its end + 24 h.
        con.execute("DELETE FROM usage WHERE minute < ?", (int((now - DAY_S) // 60.0),))
        con.execute("DELETE FROM events WHERE ts <= ?", (now - self._event_retention_s,))
        con.execute("DELETE FROM cooldowns WHERE until <= ?", (now,))
        con.execute("DELETE FROM requests WHERE ts < ?", (now - self._retention_s,))
        con.execute("DELETE FROM responses WHERE expires_at <= ?", (now,))
        con.execute("DELETE FROM cache_entries WHERE expires_at <= ?", (now,))

    def _prune_sync(self, now: float) -> None:
        con = self._con
        if con is None:
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            self._prune_in_txn(con, now)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def _write_sync(self, batch: Batch) -> None:
        failed = self._failed
        if failed is not None:
            failed.merge_newer(batch, self._max_pending_requests)
            batch = failed
        try:
            self._write_batch(batch)
        except BaseException:
            self._failed = batch
            raise
        self._failed = None

    def _write_batch(self, batch: Batch) -> None:
        con = self._con
        if con is None:
            raise RuntimeError("SQLiteStore is closed")
        con.execute("BEGIN IMMEDIATE")
        try:
            if batch.cooldowns:
                upserts = [
                    (scope, rec.until, rec.source, rec.reason)
                    for scope, rec in batch.cooldowns.items()
                    if rec is not None
                ]
                deletes = [(scope,) for scope, rec in batch.cooldowns.items() if rec is None]
                if deletes:
                    con.executemany("DELETE FROM cooldowns WHERE scope = ?", deletes)
                if upserts:
                    con.executemany(UPSERT_COOLDOWN, upserts)
            if batch.usage:
                con.executemany(
                    UPSERT_USAGE,
                    [(scope, minute, acc[0], acc[1]) for (scope, minute), acc in batch.usage.items()],
                )
            if batch.events:
                for is_insert, run in _runs(batch.events):
                    if is_insert:
                        con.executemany("INSERT INTO events (name, scope, ts) VALUES (?, ?, ?)", run)
                    else:
                        con.executemany(
                            "DELETE FROM events WHERE name = ? AND scope = ?", [(n, s) for n, s, _ in run]
                        )
            if batch.settings:
                con.executemany(UPSERT_SETTING, batch.settings.items())
            if batch.requests:
                con.executemany(INSERT_REQUEST, batch.requests)
            if batch.responses:
                deleted = [(rid,) for rid, entry in batch.responses.items() if entry is None]
                if deleted:
                    con.executemany("DELETE FROM responses WHERE id = ?", deleted)
                stored = [(rid, e[0], e[1]) for rid, e in batch.responses.items() if e is not None]
                if stored:
                    con.executemany(UPSERT_RESPONSE, stored)
            if batch.cache_cleared:
                con.execute("DELETE FROM cache_entries")
            if batch.cached:
                dropped = [(key,) for key, entry in batch.cached.items() if entry is None]
                if dropped:
                    con.executemany("DELETE FROM cache_entries WHERE key = ?", dropped)
                kept = [(key, *e) for key, e in batch.cached.items() if e is not None]
                if kept:
                    con.executemany(UPSERT_CACHED, kept)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def _get_response_sync(self, response_id: str) -> tuple[float, str] | None:
        failed = self._failed  # a write that failed is still the newest state of its rows
        if failed is not None and response_id in failed.responses:
            return failed.responses[response_id]
        con = self._con
        if con is None:
            return None
        row = con.execute("SELECT expires_at, doc FROM responses WHERE id = ?", (response_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def _load_cached_sync(self, now: float, limit: int) -> list[tuple[str, float, str]]:
        con = self._con
        if con is None:
            return []
        rows = con.execute(
            "SELECT key, expires_at, doc FROM cache_entries WHERE expires_at > ? "
            "ORDER BY stored_at DESC LIMIT ?",
            (now, limit),
        ).fetchall()
        return [(r[0], r[1], r[2]) for r in reversed(rows)]

    def _recent_sync(self, limit: int) -> list[tuple[Any, ...]]:
        con = self._con
        if con is None:
            return []
        return con.execute(
            f"SELECT {REQUEST_COLUMNS} FROM requests ORDER BY rowid DESC LIMIT ?", (limit,)
        ).fetchall()

    def _close_sync(self) -> None:
        con = self._con
        if con is not None:
            con.close()

    # -- loading --------------------------------------------------------------------------------------
    def _load(self, loaded: Loaded, now: float) -> None:
        for scope, until, source, reason in loaded.cooldowns:
            self._cooldowns[scope] = CooldownRecord(until=until, source=source, reason=reason)
        for scope, minute, requests, tokens in loaded.usage:
            self._restore_usage(scope, minute, requests, tokens, now)
        for name, scope, ts in loaded.events:
            self._restore_event(name, scope, ts)
        self._settings.update(loaded.settings)


_FUSION_END: Final = FUSION_ROUTE + ")"
"""Every ``fusion(…)`` label sorts between ``fusion`` and this (``(`` is 0x28, ``)`` 0x29)."""


def _routes(con: sqlite3.Connection) -> Iterator[str]:
    """Every distinct route of the log but fusion turns', in order: one ``requests_route`` seek each."""
    route = con.execute(ROUTE_FIRST, ("",)).fetchone()[0]
    while route is not None:
        if route == FUSION_ROUTE or route.startswith(FUSION_ROUTE + "("):
            route = con.execute(ROUTE_FIRST, (_FUSION_END,)).fetchone()[0]
            continue
        yield route
        route = con.execute(ROUTE_AFTER, (route,)).fetchone()[0]


def _decode_response(entry: tuple[float, str] | None, now: float) -> dict[str, Any] | None:
    if entry is None or entry[0] <= now:
        return None
    try:
        doc = orjson.loads(entry[1])
    except orjson.JSONDecodeError:
        log.warning("freellm state store: a stored response is not valid JSON; ignoring it")
        return None
    return doc if isinstance(doc, dict) else None


def _retrieve(fut: asyncio.Future[None]) -> None:
    """Mark a write's outcome as seen, so an awaiter cancelled meanwhile leaves no asyncio warning."""
    if not fut.cancelled():
        fut.exception()


def _runs(
    events: Iterable[tuple[str, str, float | None]],
) -> Iterable[tuple[bool, list[tuple[str, str, float | None]]]]:
    """Split the ordered event ops into maximal runs of inserts / clears (each run is one executemany)."""
    run: list[tuple[str, str, float | None]] = []
    run_insert = True
    for op in events:
        is_insert = op[2] is not None
        if run and is_insert != run_insert:
            yield run_insert, run
            run = []
        run_insert = is_insert
        run.append(op)
    if run:
        yield run_insert, run
