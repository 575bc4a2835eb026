"""``MemoryStore``: the whole :class:`~freellm.store.base.StateStore` in process memory.

It is the authoritative hot state of a single gateway (``SQLiteStore`` builds on it and writes behind to
disk) and a complete store on its own for tests and ``memory://``. Every operation runs on the event-loop
thread without awaiting anything, so a read-check-lease sequence of the router is atomic with respect to
other requests of the same process.

Memory stays bounded under any load:

* rate windows are bucketed — 1 s buckets for the 60 s window (≤ 61 per scope) and 1 min buckets for the
  sliding 24 h window (≤ 1 441 per scope) — each with running sums, so ``usage`` and ``record_usage`` are
  O(1) amortised whatever the request rate;
* events keep a capped deque of timestamps per (name, scope), pruned to the longest window asked;
* the request log is a ring of the newest ``request_log_size`` rows;
* stored responses are capped at ``response_cap`` documents (the oldest stored goes first); expired
  ones are dropped when read;
* expired cooldowns and leases are dropped lazily when their scope is touched (leases also by a periodic
  sweep, so leaked leases of scopes never read again don't pile up).

Window semantics (conservative, i.e. never under-counts): a request recorded at ``t`` counts in the 60 s
window until between ``t + 60`` and ``t + 61``, and in the 24 h window until between ``t + 86 400`` and
``t + 86 460`` — the end of its bucket plus the window. Erring on the side of "still used" means the gate
may wait up to one bucket longer than the upstream, never hit it early.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections import OrderedDict, deque
from collections.abc import Collection, Iterable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Final

from freellm.store.base import (
    Analytics,
    CooldownRecord,
    LeaseAttempt,
    RequestLogRow,
    RouteStats,
    StatusFilter,
    UsageSnapshot,
    is_fusion_turn,
    nearest_rank,
    route_order,
    within_limits,
)
from freellm.store.windows import (
    DAY_BUCKET_S,
    DAY_S,
    LEASE_SWEEP_EVERY,
    MINUTE_BUCKET_S,
    MINUTE_S,
    EventLog,
    LeaseSet,
    ScopeUsage,
)

if TYPE_CHECKING:
    from freellm.config import ModelLimits

__all__ = ["DAY_S", "MINUTE_S", "MemoryStore", "analytics_of"]

class MemoryStore:
    """Implements :class:`~freellm.store.base.StateStore` entirely in memory (nothing survives a restart).

    Each instance is independent: there is no module-level state.
    """

    def __init__(
        self, *, request_log_size: int = 10_000, event_cap: int = 10_000, response_cap: int = 10_000
    ) -> None:
        self._cooldowns: dict[str, CooldownRecord] = {}
        self._usage: dict[str, ScopeUsage] = {}
        self._leases: dict[str, LeaseSet] = {}
        """scope → its live leases (lease id → (tokens, expiry))."""
        self._lease_ids: Iterator[int] = itertools.count(1)
        self._lease_prefix = secrets.token_hex(4)
        self._lease_acquires = 0
        self._last_now = 0.0
        """Newest ``now`` a lease operation saw: the clock for :meth:`lease_count`, which takes none."""
        self._events: dict[tuple[str, str], EventLog] = {}
        self._event_cap = event_cap
        self._requests: deque[RequestLogRow] = deque(maxlen=request_log_size)
        self._settings: dict[str, str] = {}
        self._responses: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        """response id → (expires_at, document), oldest stored first."""
        self._response_cap = max(1, response_cap)
        self._sessions: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        """session key → (expires_at, document), least recently stored first."""
        self._cached: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        """cache key → (expires_at, entry), least recently stored first."""

    # -- lifecycle ------------------------------------------------------------------------------------
    async def open(self) -> None:
        """Nothing to open or load."""

    async def close(self) -> None:
        """Nothing to release. Idempotent."""

    async def flush(self) -> None:
        """Nothing is pending: memory is the only copy."""

    # -- cooldowns ------------------------------------------------------------------------------------
    async def get_cooldown(self, scope: str, now: float) -> CooldownRecord | None:
        return self._live_cooldown(scope, now)

    def _live_cooldown(self, scope: str, now: float) -> CooldownRecord | None:
        record = self._cooldowns.get(scope)
        if record is None:
            return None
        if record.until <= now:
            del self._cooldowns[scope]
            return None
        return record

    def _set_cooldown(self, scope: str, record: CooldownRecord) -> CooldownRecord:
        """Apply the never-shorten rule; returns the record now in force."""
        current = self._cooldowns.get(scope)
        if current is not None and current.until > record.until:
            # A longer one stands (if it had expired, the new one would have too: nothing is lost).
            return current
        self._cooldowns[scope] = record
        return record

    async def set_cooldown(self, scope: str, record: CooldownRecord) -> None:
        self._set_cooldown(scope, record)

    async def clear_cooldown(self, scope: str) -> None:
        self._cooldowns.pop(scope, None)

    async def active_cooldowns(self, now: float) -> dict[str, CooldownRecord]:
        cooldowns = self._cooldowns
        expired = [scope for scope, rec in cooldowns.items() if rec.until <= now]
        for scope in expired:
            del cooldowns[scope]
        return dict(cooldowns)

    # -- rate windows ---------------------------------------------------------------------------------
    async def usage(self, scope: str, now: float) -> UsageSnapshot:
        return self._usage_now(scope, now)

    def _usage_now(self, scope: str, now: float) -> UsageSnapshot:
        """:meth:`usage` without the coroutine: the lease path calls it inside one synchronous step
        (a subclass that adds other processes' counters overrides this)."""
        leased_requests = leased_tokens = 0
        leases = self._leases.get(scope)
        if leases:
            if now > self._last_now:
                self._last_now = now
            leases.prune(now)
            leased_requests = len(leases)
            leased_tokens = leases.tokens
            if not leased_requests:
                del self._leases[scope]
        su = self._usage.get(scope)
        if su is None:
            if leased_requests:
                return UsageSnapshot(leased_requests=leased_requests, leased_tokens=leased_tokens)
            return _EMPTY_USAGE
        minute = su.minute
        day = su.day
        minute.prune(now)
        day.prune(now)
        return UsageSnapshot(
            requests_minute=minute.requests,
            requests_day=day.requests,
            tokens_minute=minute.tokens,
            tokens_day=day.tokens,
            leased_requests=leased_requests,
            leased_tokens=leased_tokens,
            minute_frees_at=minute.frees_at(),
            day_frees_at=day.frees_at(),
        )

    def _record_usage(self, scope: str, tokens: int, now: float) -> None:
        su = self._usage.get(scope)
        if su is None:
            su = self._usage[scope] = ScopeUsage()
        minute = su.minute
        day = su.day
        minute.prune(now)
        day.prune(now)
        minute.add(now, 1, tokens)
        day.add(now, 1, tokens)

    async def record_usage(self, scope: str, tokens: int, now: float) -> None:
        self._record_usage(scope, tokens, now)

    def _restore_usage(self, scope: str, minute_index: int, requests: int, tokens: int, now: float) -> None:
        """Load one persisted per-minute bucket (oldest first), as if recorded at the end of its minute
        (or at ``now``, the time of loading, if that is earlier).

        The store persists minute buckets only, so this keeps the 60 s window conservative after a
        restart: the requests of the minute before a restart still count until that minute ends + 60 s.
        """
        su = self._usage.get(scope)
        if su is None:
            su = self._usage[scope] = ScopeUsage()
        su.day.add_at(minute_index, requests, tokens)
        last_second = min(
            int((minute_index + 1) * DAY_BUCKET_S - MINUTE_BUCKET_S), int(now // MINUTE_BUCKET_S)
        )
        if (last_second + 1) * MINUTE_BUCKET_S > now - MINUTE_S:
            su.minute.add_at(last_second, requests, tokens)

    # -- leases ---------------------------------------------------------------------------------------
    async def acquire_lease(self, scope: str, tokens: int, now: float, ttl_s: float) -> str:
        return self._new_lease(scope, tokens, now, ttl_s)

    def _new_lease(self, scope: str, tokens: int, now: float, ttl_s: float) -> str:
        if now > self._last_now:
            self._last_now = now
        self._lease_acquires += 1
        if self._lease_acquires % LEASE_SWEEP_EVERY == 0:
            self._sweep_leases(now)
        lease_id = f"{self._lease_prefix}-{next(self._lease_ids)}"
        leases = self._leases.get(scope)
        if leases is None:
            leases = self._leases[scope] = LeaseSet()
        leases.add(lease_id, tokens, now + ttl_s)
        return lease_id

    async def acquire_lease_within(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits
    ) -> tuple[str | None, UsageSnapshot]:
        """Atomic because nothing here suspends: no other request of this process runs between the
        usage read and the lease (subclasses that combine other processes' counters into ``usage``
        inherit it unchanged — their sharing is eventual by design)."""
        usage = self._usage_now(scope, now)
        if not within_limits(limits, usage, tokens):
            return None, usage
        return self._new_lease(scope, tokens, now, ttl_s), usage

    async def acquire_route_lease(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits, cooling: tuple[str, ...]
    ) -> LeaseAttempt:
        # One synchronous step, no coroutine per check: this runs for every routed request.
        for cooled in cooling:
            record = self._live_cooldown(cooled, now)
            if record is not None:
                return LeaseAttempt(None, _EMPTY_USAGE, (cooled, record))
        usage = self._usage_now(scope, now)
        if not within_limits(limits, usage, tokens):
            return LeaseAttempt(None, usage)
        return LeaseAttempt(self._new_lease(scope, tokens, now, ttl_s), usage)

    def batch(self) -> AbstractAsyncContextManager[None]:
        """Nothing to batch: every write here is a dictionary update."""
        return contextlib.nullcontext()

    async def settle_lease(self, scope: str, lease_id: str, tokens: int, now: float, clear: tuple[str, ...]) -> None:
        await self.record_usage(scope, tokens, now)
        events = self._events
        for name in clear:
            if (name, scope) in events:  # a success usually has no streak to clear: no call then
                await self.clear_events(name, scope)
        self._drop_lease(scope, lease_id)

    async def release_lease(self, scope: str, lease_id: str) -> None:
        self._drop_lease(scope, lease_id)

    def _drop_lease(self, scope: str, lease_id: str) -> None:
        leases = self._leases.get(scope)
        if leases is not None and leases.remove(lease_id) and not leases:
            del self._leases[scope]

    async def lease_count(self) -> int:
        self._sweep_leases(self._last_now)
        return sum(len(leases) for leases in self._leases.values())

    def _sweep_leases(self, now: float) -> None:
        empty: list[str] = []
        for scope, leases in self._leases.items():
            leases.prune(now)
            if not leases:
                empty.append(scope)
        for scope in empty:
            del self._leases[scope]

    # -- events ---------------------------------------------------------------------------------------
    def _add_event(self, name: str, scope: str, now: float, window_s: float) -> int:
        key = (name, scope)
        log = self._events.get(key)
        if log is None:
            log = self._events[key] = EventLog(self._event_cap)
        log.prune(now, window_s)
        log.times.append(now)
        return log.count(now, window_s)

    async def add_event(self, name: str, scope: str, now: float, window_s: float) -> int:
        return self._add_event(name, scope, now, window_s)

    async def count_events(self, name: str, scope: str, now: float, window_s: float) -> int:
        log = self._events.get((name, scope))
        if log is None:
            return 0
        log.prune(now, window_s)
        return log.count(now, window_s)

    async def clear_events(self, name: str, scope: str) -> None:
        self._events.pop((name, scope), None)

    def _restore_event(self, name: str, scope: str, ts: float) -> None:
        """Load one persisted event (oldest first)."""
        key = (name, scope)
        log = self._events.get(key)
        if log is None:
            log = self._events[key] = EventLog(self._event_cap)
        log.times.append(ts)

    # -- request log ----------------------------------------------------------------------------------
    async def log_request(self, row: RequestLogRow) -> None:
        self._requests.append(row)

    async def recent_requests(self, limit: int = 100) -> list[RequestLogRow]:
        if limit <= 0:
            return []
        return list(itertools.islice(reversed(self._requests), limit))

    async def query_requests(
        self, *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
    ) -> list[RequestLogRow]:
        """Over the in-memory ring (the newest ``request_log_size`` rows)."""
        if limit <= 0:
            return []
        rows = [
            r
            for r in reversed(self._requests)
            if (since is None or r.ts >= since)
            and (route is None or r.route == route)
            and (status is None or status.matches(r.status))
        ]
        # Stable: rows with the same ``ts`` stay newest-written first, as SQLite's (ts, rowid) order.
        rows.sort(key=_row_ts, reverse=True)
        del rows[limit:]
        return rows

    async def request_analytics(self, since: float, now: float) -> Analytics:
        """Over the in-memory ring (the newest ``request_log_size`` rows)."""
        return analytics_of(self._requests, since, now)

    # -- settings -------------------------------------------------------------------------------------
    async def get_setting(self, name: str) -> str | None:
        return self._settings.get(name)

    async def set_setting(self, name: str, value: str) -> None:
        self._settings[name] = value

    async def refresh_settings(self, names: Collection[str]) -> dict[str, str]:
        """Nothing to re-read: no other process shares this memory."""
        return {}

    # -- stored responses -----------------------------------------------------------------------------
    def _put_response(self, response_id: str, doc: dict[str, Any], expires_at: float) -> None:
        responses = self._responses
        responses[response_id] = (expires_at, doc)
        responses.move_to_end(response_id)
        while len(responses) > self._response_cap:
            responses.popitem(last=False)

    def _get_response(self, response_id: str, now: float) -> dict[str, Any] | None:
        entry = self._responses.get(response_id)
        if entry is None:
            return None
        if entry[0] <= now:
            del self._responses[response_id]
            return None
        return entry[1]

    async def put_response(self, response_id: str, doc: dict[str, Any], expires_at: float) -> None:
        self._put_response(response_id, doc, expires_at)

    async def get_response(self, response_id: str, now: float) -> dict[str, Any] | None:
        return self._get_response(response_id, now)

    async def delete_response(self, response_id: str, now: float) -> bool:
        entry = self._responses.pop(response_id, None)
        return entry is not None and entry[0] > now

    # -- sessions (memory only on every default backend: they live for minutes) ----------------------
    async def get_session(self, key: str, now: float) -> dict[str, Any] | None:
        entry = self._sessions.get(key)
        if entry is None:
            return None
        if entry[0] <= now:
            del self._sessions[key]
            return None
        return entry[1]

    async def put_session(self, key: str, doc: dict[str, Any], expires_at: float, max_sessions: int) -> None:
        sessions = self._sessions
        sessions[key] = (expires_at, doc)
        sessions.move_to_end(key)
        while len(sessions) > max(1, max_sessions):
            sessions.popitem(last=False)

    # -- response cache -------------------------------------------------------------------------------
    async def put_cached(self, key: str, doc: dict[str, Any], expires_at: float) -> None:
        self._cached[key] = (expires_at, doc)
        self._cached.move_to_end(key)

    async def delete_cached(self, keys: list[str]) -> None:
        for key in keys:
            self._cached.pop(key, None)

    async def clear_cached(self) -> None:
        self._cached.clear()

    async def load_cached(self, now: float, limit: int) -> list[tuple[str, float, dict[str, Any]]]:
        live = [(key, exp, doc) for key, (exp, doc) in self._cached.items() if exp > now]
        return live[-limit:] if limit > 0 else []

    async def get_cached(self, key: str, now: float) -> tuple[float, dict[str, Any]] | None:
        entry = self._cached.get(key)
        return entry if entry is not None and entry[0] > now else None


_EMPTY_USAGE: Final = UsageSnapshot()


def _row_ts(row: RequestLogRow) -> float:
    return row.ts


class _RouteAcc:
    __slots__ = ("fallbacks", "latencies", "requests", "successes", "tokens_in", "tokens_out", "ttfbs")

    def __init__(self) -> None:
        self.requests = self.successes = self.fallbacks = self.tokens_in = self.tokens_out = 0
        self.latencies: list[int] = []
        self.ttfbs: list[int] = []


def analytics_of(rows: Iterable[RequestLogRow], since: float, now: float) -> Analytics:
    """:meth:`StateStore.request_analytics` in Python, over any rows (the definition SQLite's queries
    implement; docs/analytics.md)."""
    routes: dict[str, _RouteAcc] = {}
    failures: dict[str, int] = {}
    saved = 0
    for row in rows:
        if not since <= row.ts <= now or is_fusion_turn(row.route):
            continue
        failed = row.extra.get("failed")
        if isinstance(failed, list):
            for label in failed:
                if isinstance(label, str):
                    failures[label] = failures.get(label, 0) + 1
        route = row.route
        if route is None:
            continue
        acc = routes.get(route)
        if acc is None:
            acc = routes[route] = _RouteAcc()
        acc.requests += 1
        acc.successes += row.outcome == "success"
        acc.fallbacks += row.attempts > 1
        acc.tokens_in += row.tokens_in
        acc.tokens_out += row.tokens_out
        acc.latencies.append(row.latency_ms)
        if row.stream and row.ttfb_ms is not None:
            acc.ttfbs.append(row.ttfb_ms)
        if route == "cache":
            tokens = row.extra.get("tokens_saved")
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                saved += tokens
    stats: list[RouteStats] = []
    for label in routes.keys() | failures.keys():
        acc = routes.get(label) or _RouteAcc()
        acc.latencies.sort()
        acc.ttfbs.sort()
        stats.append(
            RouteStats(
                route=label,
                requests=acc.requests,
                successes=acc.successes,
                fallbacks=acc.fallbacks,
                failures=failures.get(label, 0),
                p50_ms=nearest_rank(acc.latencies, 50),
                p95_ms=nearest_rank(acc.latencies, 95),
                ttft_p50_ms=nearest_rank(acc.ttfbs, 50),
                tokens_in=acc.tokens_in,
                tokens_out=acc.tokens_out,
            )
        )
    stats.sort(key=route_order)
    return Analytics(since=since, now=now, routes=tuple(stats), cache_tokens_saved=saved)
