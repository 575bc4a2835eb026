"""``SharedSQLiteStore``: the default store when ``freellm serve --workers N`` runs several processes.

Each worker keeps its own hot state in memory exactly like :class:`SQLiteStore` (every read stays a
dictionary lookup), and a small sync loop makes the state that routing decisions depend on agree across
the workers sharing one database file:

* **Rate windows and leases.** Every ``sync_interval_s`` each worker publishes a snapshot of its own
  per-scope counters (requests/tokens in the 60 s and 24 h windows, live leases) into the
  ``worker_usage`` table and reads every other live worker's rows. ``usage()`` answers *own + others*,
  so an RPM/RPD/TPM/TPD limit holds for the whole gateway, not per process, within one sync interval.
  A worker that stopped publishing (crashed) is ignored after ``stale_after_s``.
* **Cooldowns.** Setting or clearing one is written through at once; each sync reloads the active
  cooldowns from the file, so a key cooled by one worker is skipped by all of them within one interval.
  A cooldown cleared by another worker disappears from memory at the next sync.
* **History.** After a restart only worker 0 reloads the persisted 24 h usage (its snapshot then carries
  it to the others); every worker reloading it would count it N times.

The consistency is eventual — at most ``sync_interval_s`` (0.25 s) behind — which bounds a burst's
overshoot to what one interval lets through. Ladder and bench events stay per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from pathlib import Path
from typing import Any

from freellm.store.base import CooldownRecord, UsageSnapshot
from freellm.store.sqlite import SQLiteStore

__all__ = ["SharedSQLiteStore"]

log = logging.getLogger("freellm.store")

_WORKER_TABLE = """
CREATE TABLE IF NOT EXISTS worker_usage (
    worker          TEXT NOT NULL,
    scope           TEXT NOT NULL,
    requests_minute INTEGER NOT NULL,
    requests_day    INTEGER NOT NULL,
    tokens_minute   INTEGER NOT NULL,
    tokens_day      INTEGER NOT NULL,
    leased_requests INTEGER NOT NULL,
    leased_tokens   INTEGER NOT NULL,
    updated         REAL NOT NULL,
    PRIMARY KEY (worker, scope)
)
"""

_Counts = tuple[int, int, int, int, int, int]


class SharedSQLiteStore(SQLiteStore):
    def __init__(
        self,
        path: Path,
        *,
        worker_id: str,
        load_history: bool,
        sync_interval_s: float = 0.25,
        stale_after_s: float = 3.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(path, **kwargs)
        self.worker_id = worker_id
        self._load_history = load_history
        self._sync_interval_s = sync_interval_s
        self._stale_after_s = stale_after_s
        self._others: dict[str, _Counts] = {}
        self._published: dict[str, _Counts] = {}
        self._sync_task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await super().open()
        await self._run(self._create_worker_table)
        await self.sync()
        self._sync_task = asyncio.create_task(self._sync_loop(), name=f"freellm-worker-sync:{self.worker_id}")

    async def close(self) -> None:
        task, self._sync_task = self._sync_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(Exception):
                await self._run(self._retire_sync)
        await super().close()

    def _load(self, loaded: Any, now: float) -> None:
        if not self._load_history:
            loaded.usage = []
        super()._load(loaded, now)

    # -- reads: own state plus the other workers' last snapshot ---------------------------------------
    def _usage_now(self, scope: str, now: float) -> UsageSnapshot:
        own = super()._usage_now(scope, now)
        other = self._others.get(scope)
        if other is None:
            return own
        return UsageSnapshot(
            requests_minute=own.requests_minute + other[0],
            requests_day=own.requests_day + other[1],
            tokens_minute=own.tokens_minute + other[2],
            tokens_day=own.tokens_day + other[3],
            leased_requests=own.leased_requests + other[4],
            leased_tokens=own.leased_tokens + other[5],
            minute_frees_at=own.minute_frees_at,
            day_frees_at=own.day_frees_at,
        )

    # -- cooldowns are written through so every worker sees them at its next sync -------------------
    async def set_cooldown(self, scope: str, record: CooldownRecord) -> None:
        await super().set_cooldown(scope, record)
        await self.flush()

    async def clear_cooldown(self, scope: str) -> None:
        await super().clear_cooldown(scope)
        await self.flush()

    # -- the sync loop -------------------------------------------------------------------------------
    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self._sync_interval_s)
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("freellm worker %s: state sync with %s failed; will retry", self.worker_id, self.path)

    async def sync(self) -> None:
        """Publish this worker's counters, then adopt the others' counters and the active cooldowns."""
        now = self._clock()
        snapshot: dict[str, _Counts] = {}
        for scope in set(self._usage) | set(self._leases):
            u = await super().usage(scope, now)
            counts = (
                u.requests_minute,
                u.requests_day,
                u.tokens_minute,
                u.tokens_day,
                u.leased_requests,
                u.leased_tokens,
            )
            if any(counts):
                snapshot[scope] = counts
        changed = {s: c for s, c in snapshot.items() if self._published.get(s) != c}
        gone = [s for s in self._published if s not in snapshot]
        await self.flush()  # our own cooldown writes land before we read the file's view
        others, cooldowns = await self._run(self._sync_sync, now, changed, gone)
        self._published = snapshot
        self._others = others
        fresh = {scope: CooldownRecord(until=u, source=src, reason=why) for scope, u, src, why in cooldowns}
        for scope in [s for s in self._cooldowns if s not in fresh and s not in self._pending.cooldowns]:
            del self._cooldowns[scope]
        for scope, record in fresh.items():
            self._set_cooldown(scope, record)

    # -- database thread ------------------------------------------------------------------------------
    def _create_worker_table(self) -> None:
        con = self._connection()
        con.execute(_WORKER_TABLE)

    def _sync_sync(
        self, now: float, changed: dict[str, _Counts], gone: list[str]
    ) -> tuple[dict[str, _Counts], list[tuple[str, float, str, str]]]:
        con = self._connection()
        con.execute("BEGIN IMMEDIATE")
        try:
            if changed:
                con.executemany(
                    "INSERT OR REPLACE INTO worker_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(self.worker_id, scope, *counts, now) for scope, counts in changed.items()],
                )
            if gone:
                con.executemany(
                    "DELETE FROM worker_usage WHERE worker = ? AND scope = ?", [(self.worker_id, s) for s in gone]
                )
            con.execute("UPDATE worker_usage SET updated = ? WHERE worker = ?", (now, self.worker_id))
            # The heartbeat row (scope ''): a worker with no traffic yet is still seen as alive.
            con.execute(
                "INSERT OR REPLACE INTO worker_usage VALUES (?, '', 0, 0, 0, 0, 0, 0, ?)", (self.worker_id, now)
            )
            con.execute("DELETE FROM worker_usage WHERE updated < ?", (now - 10 * self._stale_after_s,))
            rows = con.execute(
                "SELECT scope, SUM(requests_minute), SUM(requests_day), SUM(tokens_minute), SUM(tokens_day),"
                " SUM(leased_requests), SUM(leased_tokens) FROM worker_usage"
                " WHERE worker != ? AND scope != '' AND updated >= ? GROUP BY scope",
                (self.worker_id, now - self._stale_after_s),
            ).fetchall()
            cooldowns = con.execute(
                "SELECT scope, until, source, reason FROM cooldowns WHERE until > ?", (now,)
            ).fetchall()
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return {row[0]: tuple(int(x) for x in row[1:]) for row in rows}, cooldowns  # type: ignore[misc]

    def _retire_sync(self) -> None:
        self._connection().execute("DELETE FROM worker_usage WHERE worker = ?", (self.worker_id,))

    def _connection(self) -> sqlite3.Connection:
        con = self._con
        if con is None:
            raise RuntimeError("SharedSQLiteStore is not open")
        return con
