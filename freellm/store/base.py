"""The ``StateStore`` seam: everything the engine remembers between requests.

One gateway process uses :class:`~freellm.store.sqlite.SQLiteStore` (authoritative state in memory,
written behind to SQLite so a restart keeps cooldowns, counters and the request log). Several replicas
share a Redis-backed store implementing the same protocol. The engine never touches a backend directly.

Scopes are plain strings built by :func:`key_scope` / :func:`model_scope` so every backend stores them
the same way. Times are epoch seconds (float) unless a name says ``_ms``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

if TYPE_CHECKING:
    from freellm.config import ModelLimits

__all__ = [
    "FUSION_ROUTE",
    "Analytics",
    "CooldownRecord",
    "RequestLogRow",
    "RouteStats",
    "StateStore",
    "StatusFilter",
    "UsageSnapshot",
    "is_fusion_turn",
    "key_scope",
    "model_scope",
    "nearest_rank",
    "route_order",
    "setting_object",
    "within_limits",
]


def key_scope(provider: str, model: str, key_id: str) -> str:
    """Scope of one (provider, model, key). ``key_id`` is a stable non-secret key fingerprint."""
    return f"{provider}\x1f{model}\x1f{key_id}"


def model_scope(provider: str, model: str) -> str:
    return f"{provider}\x1f{model}"


def setting_object(raw: str | None) -> dict[str, Any] | None:
    """A JSON-object setting as written by a component (learned limits, key health), or None when it
    is unset or unreadable: a damaged setting is forgotten, never a start-up failure."""
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True, slots=True)
class CooldownRecord:
    until: float
    """Epoch seconds when the cooldown ends."""
    source: str
    """Why: ``heuristic`` | ``authoritative`` | ``credit`` | ``tier`` | ``auth`` | ``bench``."""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class UsageSnapshot:
    """Counters of one key scope at one instant, leases included."""

    requests_minute: int = 0
    requests_day: int = 0
    tokens_minute: int = 0
    tokens_day: int = 0
    leased_requests: int = 0
    leased_tokens: int = 0
    minute_frees_at: float | None = None
    """When the oldest usage in the 60 s window leaves it (None: the window is empty). Best effort, for
    ``retryAtMs`` hints; a backend that cannot tell leaves it None."""
    day_frees_at: float | None = None
    """The same for the sliding 24 h window."""


@dataclass(slots=True)
class RequestLogRow:
    """One row per request the gateway answered (or that the client abandoned)."""

    request_id: str
    ts: float
    surface: str
    requested_model: str
    route: str | None
    status: int
    stream: bool
    attempts: int
    latency_ms: int
    ttfb_ms: int | None
    tokens_in: int
    tokens_out: int
    error_class: str | None = None
    outcome: str = "success"
    """``success`` | ``error`` | ``canceled``."""
    extra: dict[str, Any] = field(default_factory=dict)


FUSION_ROUTE = "fusion"
"""The route of a fusion turn's top-level row: ``fusion``, or ``fusion(a+b -> judge)`` once it ran."""


def is_fusion_turn(route: str | None) -> bool:
    """A fusion turn's top-level row (its panel and judge calls have rows of their own, with their
    ``provider/model`` route and ``extra["fusion_role"]``)."""
    return route is not None and (route == FUSION_ROUTE or route.startswith(FUSION_ROUTE + "("))


def nearest_rank(sorted_values: list[int], percent: int) -> int | None:
    """The nearest-rank percentile: the smallest value with at least ``percent`` % of the values at or
    below it (the value at 1-based rank ⌈percent·n/100⌉); None for no values."""
    n = len(sorted_values)
    if n == 0:
        return None
    return sorted_values[(percent * n + 99) // 100 - 1]


@dataclass(frozen=True, slots=True)
class StatusFilter:
    """The HTTP statuses a request-log query keeps: inclusive ranges (``429`` is ``(429, 429)``,
    ``5xx`` is ``(500, 599)``); a row matches when its status is in any of them."""

    ranges: tuple[tuple[int, int], ...]

    def matches(self, status: int) -> bool:
        return any(lo <= status <= hi for lo, hi in self.ranges)


@dataclass(frozen=True, slots=True)
class RouteStats:
    """One route's share of the request log in an analytics window (docs/analytics.md)."""

    route: str
    requests: int
    """Rows whose route is this label: the client requests (and fusion panel/judge calls) it answered."""
    successes: int
    """Of those, the rows whose outcome is ``success``."""
    fallbacks: int
    """Of those, the rows with ``attempts > 1``: at least one failed attempt came first (``log_turn``
    writes ``attempts = len(failed) + 1`` for an answered request)."""
    failures: int
    """Failed attempts on this route, from every row's ``extra["failed"]`` (fusion top-level rows aside)."""
    p50_ms: int | None
    p95_ms: int | None
    """Nearest-rank percentiles of the answered requests' ``latency_ms`` (None: no answered request)."""
    ttft_p50_ms: int | None
    """Nearest-rank median ``ttfb_ms`` of the answered streamed requests (None: no stream)."""
    tokens_in: int
    tokens_out: int

    @property
    def success_rate(self) -> float:
        """successes / (requests + failures): of every attempt that ended on this route, the share that
        answered successfully. A route is listed only when the denominator is positive."""
        total = self.requests + self.failures
        return self.successes / total if total else 0.0

    @property
    def fallback_rate(self) -> float | None:
        """fallbacks / requests (None when the route answered nothing)."""
        return self.fallbacks / self.requests if self.requests else None


@dataclass(frozen=True, slots=True)
class Analytics:
    """The request log between ``since`` and ``now`` (both inclusive, epoch seconds), per route."""

    since: float
    now: float
    routes: tuple[RouteStats, ...]
    """Most requests first (then most failures, then by label)."""
    cache_tokens_saved: int
    """Σ ``extra["tokens_saved"]`` over the window's cache hits (route ``cache``)."""


def route_order(stats: RouteStats) -> tuple[int, int, str]:
    """The order of :attr:`Analytics.routes`: most requests, then most failures, then the label."""
    return (-stats.requests, -stats.failures, stats.route)

def analytics_with_failures(
    stats: list[RouteStats], failures: dict[str, int], *, since: float, now: float, cache_tokens_saved: int
) -> Analytics:
    """The finished :class:`Analytics`: each route's failed attempts merged into its row, a row for each
    route that only failed (so it shows at all), in :func:`route_order`."""
    rows = [dataclasses.replace(s, failures=failures.get(s.route, 0)) for s in stats]
    answered = {s.route for s in stats}
    rows += [
        RouteStats(
            route=route,
            requests=0,
            successes=0,
            fallbacks=0,
            failures=n,
            p50_ms=None,
            p95_ms=None,
            ttft_p50_ms=None,
            tokens_in=0,
            tokens_out=0,
        )
        for route, n in failures.items()
        if route not in answered
    ]
    rows.sort(key=route_order)
    return Analytics(since=since, now=now, routes=tuple(rows), cache_tokens_saved=int(cache_tokens_saved))


def shares_hot_state(store: object) -> bool:
    """Whether other gateway processes read this store's hot state (Redis): the response cache then
    writes its stream replays there too, so another replica can replay them."""
    return bool(getattr(store, "shared_hot_state", False))


@dataclass(frozen=True, slots=True)
class LeaseAttempt:
    """What :meth:`StateStore.acquire_route_lease` decided."""

    lease_id: str | None
    """The lease taken, or None (the scope is at its limit, or a scope asked about is cooling down)."""
    usage: UsageSnapshot
    """The usage the decision saw, before the new lease (empty when a cooldown decided it)."""
    cooling: tuple[str, CooldownRecord] | None = None
    """The first scope asked about that is cooling down, and its cooldown: then nothing else was
    checked and no lease was taken."""


def within_limits(limits: ModelLimits, usage: UsageSnapshot, tokens: int) -> bool:
    """Whether one more request of ``tokens`` fits ``limits`` given ``usage`` (windows plus leases).

    The arithmetic of :func:`freellm.routing.limits.check_limits` reduced to its yes/no, here so a
    backend can run it inside its own atomic section (``acquire_lease_within``) without importing the
    router: requests deny at ``used + leased >= limit``, tokens at ``used + leased + tokens > limit``;
    a ``None`` limit is unknown, i.e. unlimited. A Redis Lua script repeats it (keep them in step)."""
    leased = usage.leased_requests
    if limits.rpd is not None and usage.requests_day + leased >= limits.rpd:
        return False
    if limits.rpm is not None and usage.requests_minute + leased >= limits.rpm:
        return False
    leased_tokens = usage.leased_tokens + tokens
    if limits.tpd is not None and usage.tokens_day + leased_tokens > limits.tpd:
        return False
    return not (limits.tpm is not None and usage.tokens_minute + leased_tokens > limits.tpm)


def request_row(t: Sequence[Any]) -> RequestLogRow:
    """A request-log row from a database row in the column order every records store uses
    (``request_id, ts, surface, requested_model, route, status, stream, attempts, latency_ms, ttfb_ms,
    tokens_in, tokens_out, error_class, outcome, extra``); an unreadable ``extra`` reads as ``{}``."""
    try:
        extra = orjson.loads(t[14]) if t[14] else {}
    except orjson.JSONDecodeError:
        extra = {}
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
        extra=extra if isinstance(extra, dict) else {},
    )


def store_health(store: object) -> dict[str, str]:
    """A store's degraded parts — its ``health()`` when it has one, e.g. ``{"state": "local"}`` (Redis
    unreachable, hot state kept per process) or ``{"records": "buffering"}`` (PostgreSQL unreachable,
    log rows held in memory); {} when all is well or for a store that cannot degrade."""
    health = getattr(store, "health", None)
    return dict(health()) if callable(health) else {}


@runtime_checkable
class StateStore(Protocol):
    """Every operation the engine needs; each backend implements all of them."""

    async def open(self) -> None:
        """Create tables/connections and load persisted state."""

    async def close(self) -> None:
        """Flush everything pending and release resources. Idempotent."""

    async def flush(self) -> None:
        """Persist everything written so far (write-behind backends)."""

    # -- cooldowns per key scope (or model scope for a bench) --------------------------------------
    async def get_cooldown(self, scope: str, now: float) -> CooldownRecord | None:
        """The active cooldown of ``scope``, or None when there is none or it expired."""

    async def set_cooldown(self, scope: str, record: CooldownRecord) -> None:
        """Set a cooldown; never shortens an active longer one."""

    async def clear_cooldown(self, scope: str) -> None: ...

    async def active_cooldowns(self, now: float) -> dict[str, CooldownRecord]:
        """Every cooldown still running (for ``retryAtMs`` and dashboards)."""

    # -- rate windows and in-flight leases per key scope -------------------------------------------
    async def usage(self, scope: str, now: float) -> UsageSnapshot:
        """Requests and tokens in the last 60 s and 24 h, plus live leases."""

    async def record_usage(self, scope: str, tokens: int, now: float) -> None:
        """Count one successful request and its tokens (counters are written only on success)."""

    async def acquire_lease(self, scope: str, tokens: int, now: float, ttl_s: float) -> str:
        """Reserve one in-flight request and its token estimate; returns a lease id."""

    async def acquire_lease_within(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits
    ) -> tuple[str | None, UsageSnapshot]:
        """Check-and-lease as one atomic step: the scope's usage (windows and live leases) and, when one
        more request of ``tokens`` fits ``limits`` (:func:`within_limits`), a lease taken on it.

        Returns ``(lease_id, usage)``, or ``(None, usage)`` when the request does not fit; ``usage`` is
        what the decision saw, before the new lease. Atomic across every process sharing the backend, so
        two replicas can never both take a scope's last slot (a separate ``usage`` then
        ``acquire_lease`` could)."""
        ...

    async def acquire_route_lease(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits, cooling: tuple[str, ...]
    ) -> LeaseAttempt:
        """The router's whole per-key decision in one step — one round trip on a shared store: unless
        one of the ``cooling`` scopes (the model's bench, the key's own scope) has an active cooldown,
        :meth:`acquire_lease_within`."""
        ...

    async def release_lease(self, scope: str, lease_id: str) -> None:
        """Release a lease. Idempotent: releasing twice or an expired lease is a no-op."""

    def batch(self) -> AbstractAsyncContextManager[None]:
        """``async with store.batch():`` — the hot-state writes made inside that can wait for its end
        (:meth:`settle_lease`, :meth:`put_session`) are sent together then, one round trip on a shared
        store; reads and other writes are not deferred. It follows the task's context (tasks started
        inside join it); nesting is allowed. A no-op where writes cost no round trip."""
        ...

    async def settle_lease(self, scope: str, lease_id: str, tokens: int, now: float, clear: tuple[str, ...]) -> None:
        """A successful attempt's bookkeeping in one step (one round trip on a shared store): count it in
        the windows (:meth:`record_usage`), forget its failure streaks (:meth:`clear_events` of each name
        in ``clear``), then release its lease — in that order, so no other process ever sees the request
        as neither leased nor counted."""
        ...

    async def lease_count(self) -> int:
        """Live leases across all scopes (tests check it returns to zero)."""

    # -- timestamped events (ladder hits, 429 streaks, model-bench failures, empty-length streaks) --
    async def add_event(self, name: str, scope: str, now: float, window_s: float) -> int:
        """Record an event and return how many of that name/scope fall inside the last ``window_s``."""

    async def count_events(self, name: str, scope: str, now: float, window_s: float) -> int: ...

    async def clear_events(self, name: str, scope: str) -> None: ...

    # -- request log --------------------------------------------------------------------------------
    async def log_request(self, row: RequestLogRow) -> None:
        """Append a request-log row (may be written behind; never blocks the reply)."""

    async def recent_requests(self, limit: int = 100) -> list[RequestLogRow]:
        """Newest first."""

    async def query_requests(
        self, *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
    ) -> list[RequestLogRow]:
        """The newest ``limit`` rows (by ``ts``, then by when they were written) with a status in
        ``status``, exactly this ``route`` and ``ts >= since`` (None: no such filter)."""

    async def request_analytics(self, since: float, now: float) -> Analytics:
        """Per-route statistics over the rows with ``since <= ts <= now`` (docs/analytics.md)."""

    # -- small key/value settings (generated client key, etc.) ---------------------------------------
    async def get_setting(self, name: str) -> str | None: ...

    async def set_setting(self, name: str, value: str) -> None: ...

    async def refresh_settings(self, names: Collection[str]) -> dict[str, str]:
        """Re-read ``names`` from where other processes (another worker, ``freellm keys --config``) write
        them; returns those whose value changed since this process last saw them, with the new value, and
        :meth:`get_setting` answers with it from now on. A setting this process changed and has not yet
        persisted is kept as it is (its own write is newer)."""
        ...

    # -- stored Responses API responses (``previous_response_id`` chains, GET/DELETE by id) ----------
    async def put_response(self, response_id: str, doc: dict[str, Any], expires_at: float) -> None:
        """Store (or replace) a response document until ``expires_at``. ``doc`` must be JSON-ready and
        is not copied: the caller must not change it afterwards."""

    async def get_response(self, response_id: str, now: float) -> dict[str, Any] | None:
        """The stored document, or None when unknown, deleted or expired. Treat it as read-only."""

    async def delete_response(self, response_id: str, now: float) -> bool:
        """Remove a stored response; False when there was none (or it had expired)."""

    # -- conversation sessions (sticky route, handoff memory, reasoning memory) ------------------------
    async def get_session(self, key: str, now: float) -> dict[str, Any] | None:
        """The live session document, or None (unknown or expired). Treat it as read-only."""

    async def put_session(self, key: str, doc: dict[str, Any], expires_at: float, max_sessions: int) -> None:
        """Store (or replace) a session until ``expires_at``, keeping at most ``max_sessions`` (the least
        recently stored go first). ``doc`` must be JSON-ready and is not copied."""

    # -- response cache: stored non-stream reply bodies -----------------------------------------------
    # The cache service keeps its LRU (and the stream replays, which are never persisted) in memory;
    # the store only makes the JSON entries outlive a restart.
    async def put_cached(self, key: str, doc: dict[str, Any], expires_at: float) -> None:
        """Persist (or replace) one cache entry until ``expires_at``. ``doc`` must be JSON-ready."""

    async def delete_cached(self, keys: list[str]) -> None:
        """Forget these entries (evicted or expired). Unknown keys are ignored."""

    async def clear_cached(self) -> None:
        """Forget every cache entry."""

    async def load_cached(self, now: float, limit: int) -> list[tuple[str, float, dict[str, Any]]]:
        """The newest ``limit`` unexpired entries as (key, expires_at, doc), least recently stored first
        (the order a start-up rebuilds its LRU in)."""

    async def get_cached(self, key: str, now: float) -> tuple[float, dict[str, Any]] | None:
        """One unexpired entry as (expires_at, doc), or None: how a replica finds an answer another
        replica stored (a shared store); a local store answers from the entries it holds."""
