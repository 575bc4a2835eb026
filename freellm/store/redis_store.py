"""``RedisHotStore``: the hot state of a fleet of replicas in one Redis (docs/deployment.md).

What every replica must agree on for the client's *next* request — cooldowns, the sliding 60 s / 24 h
request and token windows, in-flight leases, ladder/bench events, sticky sessions, cached answers — is
kept in Redis under ``<namespace>:``, each write awaited before the method returns (no write-behind:
the next turn may land on any replica). The read-decide-write operations are Lua scripts
(:mod:`freellm.store.redis_lua`), so each is atomic and one round trip; ``acquire_lease_within`` is the
router's check-and-lease, so two replicas can never both take a key's last slot. Commands go through
:class:`~freellm.store.redis_link.RedisLink` (redis-py's connections without the client's per-command
layers: the hot path's client-side cost).

It *is* a :class:`MemoryStore`: the durable-record half (request log, settings, stored responses) is
never asked of it — :class:`~freellm.store.composite.CompositeStore` sends those elsewhere — and the
inherited in-memory hot state is the fallback. When Redis is unreachable (refused, or silent past
``timeout_ms``) the store degrades: every hot operation runs on this process's memory, Redis is not
tried again per request (no timeouts piling up), one warning is logged, and a background task PINGs
with backoff (0.5 s doubling to 10 s) until Redis answers, then one info line and Redis is used again.
What was counted locally meanwhile stays local: losing Redis costs routing accuracy, not availability.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from freellm.store import redis_lua
from freellm.store.base import CooldownRecord, LeaseAttempt, UsageSnapshot, within_limits
from freellm.store.memory import MemoryStore
from freellm.store.redis_link import Arg, Command, RedisLink, Script
from freellm.store.redis_values import (
    GRACE_MS,
    cooldown,
    entry,
    fnum,
    limit_args,
    px,
    snapshot,
    text,
    usage_args,
    with_leases,
)

if TYPE_CHECKING:
    from freellm.config import ModelLimits

__all__ = ["RedisHotStore", "RedisStartError", "redact_url"]

log = logging.getLogger("freellm.store")

_EVENT_CAP: Final = 10_000
_RECONNECT_FIRST_S: Final = 0.5
_RECONNECT_MAX_S: Final = 10.0
_OUTAGE: Final = (RedisError, OSError, TimeoutError)
"""What makes Redis "unreachable" for this store (a ``ResponseError`` too: a Redis that answers with
errors — read-only replica, out of memory — cannot hold the fleet's state either)."""


class RedisStartError(RuntimeError):
    """Redis answered but refused this gateway (wrong password, unknown database): a configuration
    problem, not an outage, so the gateway must not start on local state and hide it."""


def redact_url(url: str) -> str:
    """``url`` without its credentials, for logs: ``redis://user:pw@host:6379/0`` →
    ``redis://***@host:6379/0`` (a URL that cannot be parsed is not shown at all)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rpartition("@")[2]
        return f"{parts.scheme}://{netloc}{parts.path}"  # the query (``?password=``) is dropped too
    except ValueError:
        return "<redis url>"


class _Local:
    """The marker of "Redis was not used": the caller answers from memory instead."""


_LOCAL: Final = _Local()


class _Scripts:
    """The Lua scripts, by EVALSHA (the link loads one that Redis lost, after a restart)."""

    usage: Final = Script.of(redis_lua.USAGE)
    record_usage: Final = Script.of(redis_lua.RECORD_USAGE)
    settle: Final = Script.of(redis_lua.SETTLE)
    acquire: Final = Script.of(redis_lua.ACQUIRE)
    acquire_within: Final = Script.of(redis_lua.ACQUIRE_WITHIN)
    acquire_route: Final = Script.of(redis_lua.ACQUIRE_ROUTE)
    release: Final = Script.of(redis_lua.RELEASE)
    lease_count: Final = Script.of(redis_lua.LEASE_COUNT)
    set_cooldown: Final = Script.of(redis_lua.SET_COOLDOWN)
    active_cooldowns: Final = Script.of(redis_lua.ACTIVE_COOLDOWNS)
    events: Final = Script.of(redis_lua.EVENTS)
    put_budgeted: Final = Script.of(redis_lua.PUT_BUDGETED)
    load_cached: Final = Script.of(redis_lua.LOAD_CACHED)
    clear_cached: Final = Script.of(redis_lua.CLEAR_CACHED)

    @classmethod
    def all(cls) -> list[Script]:
        return [v for v in vars(cls).values() if isinstance(v, Script)]


_S: Final = _Scripts  # (short: every operation below names one)


@dataclass(frozen=True, slots=True)
class _Write:
    """A write that can join a batch: its ``commands``, and its ``local`` fallback while Redis is
    unreachable."""

    commands: tuple[Command, ...]
    local: Callable[[], Awaitable[None]]


@dataclass(slots=True)
class _Batch:
    writes: list[_Write] = field(default_factory=list)
    open: bool = True


class RedisHotStore(MemoryStore):
    """The hot-state half of a fleet's store (see the module); ``namespace`` prefixes every key."""

    shared_hot_state = True
    """Other replicas read what this store holds: the response cache stores stream replays here too and
    asks :meth:`get_cached` on a miss (:func:`freellm.store.base.shares_hot_state`)."""

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        timeout_ms: int,
        reconnect_first_s: float = _RECONNECT_FIRST_S,
        reconnect_max_s: float = _RECONNECT_MAX_S,
    ) -> None:
        super().__init__()
        self._url = url
        self._where = redact_url(url)
        self._p = f"{namespace}:"
        self._k_leases = self._k("L")
        self._k_lease_now = self._k("lnow")
        self._k_cooldowns = self._k("cd")
        self._timeout_s = timeout_ms / 1000
        self._reconnect_first_s = reconnect_first_s
        self._reconnect_max_s = reconnect_max_s
        self._client: aioredis.Redis | None = None
        self._link: RedisLink | None = None
        self._degraded = False
        self._reconnect: asyncio.Task[None] | None = None
        self._ids: Iterator[int] = itertools.count(1)
        self._id_prefix = secrets.token_hex(6)
        self._lease_now = 0.0
        """Newest ``now`` a lease operation of this process saw (``lease_count`` takes none)."""
        self._orphans: dict[str, tuple[str, str]] = {}
        """Local lease id → (scope, Redis lease id) for a lease whose Redis call timed out: Redis may
        have taken it anyway, so it is released there too (now, or once Redis answers again)."""
        self._orphans_done: list[tuple[str, str]] = []
        """Such Redis leases whose local lease was released while Redis was still away."""
        self._batch: ContextVar[_Batch | None] = ContextVar(f"freellm-redis-batch-{id(self):x}", default=None)
        """The current task's :meth:`batch` (a context variable: concurrent requests batch apart)."""
        self._cache_budget = 0
        """The response cache's entry budget, learned from ``load_cached(limit=max_entries)`` at start-up:
        the entries in Redis are trimmed to it (least recently stored first) — one budget for the fleet."""

    # -- lifecycle ----------------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect (bounded by ``timeout_ms``). Unreachable → start degraded; refused → RedisStartError."""
        await super().open()
        client = aioredis.from_url(
            self._url,
            # No per-read/per-write timeout: every call runs under one asyncio.timeout (``_run``); redis-py's
            # own would only add a task per write and a timer per read (redis_link).
            socket_timeout=None,
            socket_connect_timeout=self._timeout_s,
            retry=Retry(NoBackoff(), 0),  # a failed call degrades at once; the reconnect task retries
            health_check_interval=0,
        )
        self._client = client
        self._link = RedisLink(client, _S.all())
        try:
            async with asyncio.timeout(self._timeout_s):
                await client.ping()
        except AuthenticationError:
            await self._drop_client()
            raise RedisStartError(f"Redis at {self._where} refused the login (storage.redis_url)") from None
        except ResponseError as exc:
            await self._drop_client()
            raise RedisStartError(f"Redis at {self._where} refused the connection: {exc}") from None
        except _OUTAGE as exc:
            self._degrade(exc)

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        if client is not None:
            with contextlib.suppress(*_OUTAGE):
                await client.aclose()

    async def close(self) -> None:
        task, self._reconnect = self._reconnect, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._drop_client()
        await super().close()

    def health(self) -> dict[str, str]:
        """``{"state": "local"}`` while Redis is unreachable (hot state per process), else {}."""
        return {"state": "local"} if self._degraded else {}

    # -- degradation --------------------------------------------------------------------------------
    async def _run(self, *commands: Command) -> list[Any] | _Local:
        """Each command's reply (one round trip, within ``timeout_ms``), or ``_LOCAL`` when degraded
        (now or by this failure)."""
        link = self._link
        if self._degraded or link is None:
            return _LOCAL
        try:
            async with asyncio.timeout(self._timeout_s):
                return await link.call(*commands)
        except _OUTAGE as exc:
            self._degrade(exc)
            return _LOCAL

    async def _run1(self, command: Command) -> Any:
        """One command's reply, or ``_LOCAL`` (see :meth:`_run`)."""
        replies = await self._run(command)
        return replies if isinstance(replies, _Local) else replies[0]

    def _degrade(self, exc: BaseException) -> None:
        if self._degraded:
            return
        self._degraded = True
        # A server's error reply names its cause (never the URL); a network error's text may hold the host only.
        cause = f"{type(exc).__name__}: {exc}" if isinstance(exc, ResponseError) else type(exc).__name__
        log.warning(
            "Redis hot state at %s unreachable (%s): serving on this process's local state until it answers",
            self._where,
            cause,
        )
        if self._reconnect is None or self._reconnect.done():
            self._reconnect = asyncio.get_running_loop().create_task(
                self._reconnect_loop(), name="freellm-redis-reconnect"
            )

    async def _reconnect_loop(self) -> None:
        delay = self._reconnect_first_s
        while True:
            await asyncio.sleep(delay)
            client = self._client
            if client is None:
                return
            try:
                async with asyncio.timeout(self._timeout_s):
                    await client.ping()
            except _OUTAGE:
                delay = min(delay * 2, self._reconnect_max_s)
                continue
            self._degraded = False
            log.info("Redis hot state at %s answers again: hot state is shared again", self._where)
            done, self._orphans_done = self._orphans_done, []
            for scope, lease_id in done:  # leases a timed-out call may have left in Redis
                await self._release_remote(scope, lease_id)
            return

    # -- keys -----------------------------------------------------------------------------------------
    def _k(self, *parts: str) -> str:
        return self._p + ":".join(parts)

    def _event_keys(self, name: str, scope: str) -> tuple[str, str]:
        """An event log's sorted set and its horizon."""
        tail = name + "\x1f" + scope
        return self._p + "e:" + tail, self._p + "eh:" + tail

    def _next_id(self) -> str:
        return f"r{self._id_prefix}-{next(self._ids)}"

    # -- cooldowns ------------------------------------------------------------------------------------
    async def get_cooldown(self, scope: str, now: float) -> CooldownRecord | None:
        raw = await self._run1(("HGET", self._k_cooldowns, scope))
        if isinstance(raw, _Local):
            return await super().get_cooldown(scope, now)
        if not isinstance(raw, bytes):
            return None
        record = cooldown(raw)
        return record if record.until > now else None

    async def set_cooldown(self, scope: str, record: CooldownRecord) -> None:
        value = fnum(record.until) + " " + orjson.dumps([record.source, record.reason]).decode()
        if isinstance(await self._run(_S.set_cooldown([self._k_cooldowns], [scope, fnum(record.until), value])), _Local):
            await super().set_cooldown(scope, record)

    async def clear_cooldown(self, scope: str) -> None:
        if isinstance(await self._run(("HDEL", self._k_cooldowns, scope)), _Local):
            await super().clear_cooldown(scope)
        else:
            self._cooldowns.pop(scope, None)  # one set while degraded must not come back later

    async def active_cooldowns(self, now: float) -> dict[str, CooldownRecord]:
        flat = await self._run1(_S.active_cooldowns([self._k_cooldowns], [fnum(now)]))
        if isinstance(flat, _Local):
            return await super().active_cooldowns(now)
        return {text(flat[i]): cooldown(flat[i + 1]) for i in range(0, len(flat), 2)}

    # -- rate windows ---------------------------------------------------------------------------------
    def _usage_keys(self, scope: str) -> list[str]:
        return [self._p + "u:" + scope, self._p + "l:" + scope, self._k_leases]

    async def usage(self, scope: str, now: float) -> UsageSnapshot:
        if now > self._lease_now:
            self._lease_now = now
        row = await self._run1(_S.usage(self._usage_keys(scope), [fnum(now)]))
        if isinstance(row, _Local):
            return await super().usage(scope, now)
        local = self._leases.get(scope)
        snap = snapshot(row)
        if local:  # leases taken while degraded still count until they are released
            extra = await super().usage(scope, now)
            snap = with_leases(snap, extra.leased_requests, extra.leased_tokens)
        return snap

    async def record_usage(self, scope: str, tokens: int, now: float) -> None:
        command = _S.record_usage([self._k("u", scope)], usage_args(tokens, now))
        if isinstance(await self._run(command), _Local):
            await super().record_usage(scope, tokens, now)

    # -- leases ---------------------------------------------------------------------------------------
    def _lease_args(self, tokens: int, now: float, ttl_s: float) -> tuple[str, list[Arg]]:
        if now > self._lease_now:
            self._lease_now = now
        lease_id = self._next_id()
        ttl_ms = max(1, math.ceil(ttl_s * 1000)) + GRACE_MS
        return lease_id, [fnum(now), lease_id, fnum(now + ttl_s), int(tokens), ttl_ms]

    async def acquire_lease(self, scope: str, tokens: int, now: float, ttl_s: float) -> str:
        lease_id, args = self._lease_args(tokens, now, ttl_s)
        keys = [self._k("l", scope), self._k_leases, self._k_lease_now]
        was_degraded = self._degraded
        if isinstance(await self._run(_S.acquire(keys, args)), _Local):
            local = await super().acquire_lease(scope, tokens, now, ttl_s)
            self._maybe_orphaned(was_degraded, local, scope, lease_id)
            return local
        return lease_id

    async def acquire_lease_within(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits
    ) -> tuple[str | None, UsageSnapshot]:
        """One Lua script: prune the windows, count the live leases, check ``limits`` and lease."""
        if self._leases.get(scope):
            # Leases taken here while Redis was away still hold slots: decide on the combined
            # figures (two steps, each atomic; only until those few leases are released).
            usage = await self.usage(scope, now)
            if not within_limits(limits, usage, tokens):
                return None, usage
            return await self.acquire_lease(scope, tokens, now, ttl_s), usage
        lease_id, args = self._lease_args(tokens, now, ttl_s)
        keys = [*self._usage_keys(scope), self._k_lease_now]
        was_degraded = self._degraded
        row = await self._run1(_S.acquire_within(keys, [*args, *limit_args(limits)]))
        if isinstance(row, _Local):
            local, local_usage = await super().acquire_lease_within(scope, tokens, now, ttl_s, limits)
            self._maybe_orphaned(was_degraded, local, scope, lease_id)
            return local, local_usage
        usage = snapshot(row[1:])
        return (lease_id if int(row[0]) else None), usage

    async def acquire_route_lease(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits, cooling: tuple[str, ...]
    ) -> LeaseAttempt:
        """One Lua script: the ``cooling`` scopes' cooldowns, then :meth:`acquire_lease_within`'s check
        and lease — a routing decision is one round trip."""
        if self._leases.get(scope):  # local leases from an outage: the combined path (see acquire_lease_within)
            return await super().acquire_route_lease(scope, tokens, now, ttl_s, limits, cooling)
        lease_id, args = self._lease_args(tokens, now, ttl_s)
        keys = [*self._usage_keys(scope), self._k_lease_now, self._k_cooldowns]
        was_degraded = self._degraded
        row = await self._run1(_S.acquire_route(keys, [*args, *limit_args(limits), *cooling]))
        if isinstance(row, _Local):
            attempt = await super().acquire_route_lease(scope, tokens, now, ttl_s, limits, cooling)
            self._maybe_orphaned(was_degraded, attempt.lease_id, scope, lease_id)
            return attempt
        blocked = int(row[1])
        if blocked:
            return LeaseAttempt(None, UsageSnapshot(), (cooling[blocked - 1], cooldown(row[2])))
        usage = snapshot(row[3:])
        return LeaseAttempt(lease_id if int(row[0]) else None, usage)

    def _maybe_orphaned(self, was_degraded: bool, local: str | None, scope: str, remote: str) -> None:
        """A lease call that failed just now (not one skipped while degraded) may still have reached
        Redis: pair the Redis lease id with the local lease that replaced it."""
        if not was_degraded and local is not None:
            self._orphans[local] = (scope, remote)

    async def _release_remote(self, scope: str, lease_id: str) -> None:
        if isinstance(await self._run(_S.release([self._k("l", scope), self._k_leases], [lease_id])), _Local):
            self._orphans_done.append((scope, lease_id))

    async def release_lease(self, scope: str, lease_id: str) -> None:
        local = self._leases.get(scope)
        if local is not None and lease_id in local:  # taken while degraded: it lives in memory
            await super().release_lease(scope, lease_id)
            orphan = self._orphans.pop(lease_id, None)
            if orphan is not None:
                await self._release_remote(*orphan)
            return
        await self._release_remote(scope, lease_id)  # unreachable: released once Redis answers (or expires)

    async def settle_lease(self, scope: str, lease_id: str, tokens: int, now: float, clear: tuple[str, ...]) -> None:
        """One script (count, clear the streaks, release: in that order), or a part of the current
        :meth:`batch`."""
        local = self._leases.get(scope)
        if local is not None and lease_id in local:  # a lease from an outage: the step-by-step path
            await super().settle_lease(scope, lease_id, tokens, now, clear)
            return
        for name in clear:
            await MemoryStore.clear_events(self, name, scope)
        keys = self._usage_keys(scope)
        for name in clear:
            keys.extend(self._event_keys(name, scope))
        command = _S.settle(keys, [*usage_args(tokens, now), lease_id])

        async def local_fallback() -> None:
            await MemoryStore.record_usage(self, scope, tokens, now)
            self._orphans_done.append((scope, lease_id))  # released in Redis once it answers again

        await self._write(_Write((command,), local_fallback))

    # -- batched writes --------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """Writes made inside (a success's settlement, the session write) go to Redis together at the
        end, in one pipeline: one round trip where there were several. Reads are never deferred. The
        batch follows the task's context: tasks started inside it join it (their writes go at its end),
        other requests' tasks do not, and a write made after the end goes out on its own."""
        if self._batch.get() is not None:  # nested: the outermost batch sends
            yield
            return
        pending = _Batch()
        token = self._batch.set(pending)
        try:
            yield
        finally:
            pending.open = False
            self._batch.reset(token)
            if pending.writes:
                await self._send(pending.writes)

    async def _write(self, write: _Write) -> None:
        pending = self._batch.get()
        if pending is not None and pending.open and not self._degraded:
            pending.writes.append(write)
            return
        await self._send([write])

    async def _send(self, writes: list[_Write]) -> None:
        """``writes`` in one round trip; unreachable: each write's local fallback."""
        if isinstance(await self._run(*[c for w in writes for c in w.commands]), _Local):
            for write in writes:
                await write.local()

    async def lease_count(self) -> int:
        shared = await self._run1(_S.lease_count([self._k_leases, self._k_lease_now], [fnum(self._lease_now)]))
        local = await super().lease_count()
        return local if isinstance(shared, _Local) else int(shared) + local

    # -- events ---------------------------------------------------------------------------------------
    async def _redis_events(self, name: str, scope: str, now: float, window_s: float, member: str) -> Any:
        keys = self._event_keys(name, scope)
        return await self._run1(_S.events(keys, [fnum(now), fnum(window_s), member, _EVENT_CAP]))

    async def add_event(self, name: str, scope: str, now: float, window_s: float) -> int:
        n = await self._redis_events(name, scope, now, window_s, f"{fnum(now)}:{self._next_id()}")
        return await super().add_event(name, scope, now, window_s) if isinstance(n, _Local) else int(n)

    async def count_events(self, name: str, scope: str, now: float, window_s: float) -> int:
        n = await self._redis_events(name, scope, now, window_s, "")
        return await super().count_events(name, scope, now, window_s) if isinstance(n, _Local) else int(n)

    async def clear_events(self, name: str, scope: str) -> None:
        await super().clear_events(name, scope)
        await self._run(("DEL", *self._event_keys(name, scope)))

    # -- sessions -------------------------------------------------------------------------------------
    async def get_session(self, key: str, now: float) -> dict[str, Any] | None:
        raw = await self._run1(("GET", self._k("s", key)))
        if isinstance(raw, _Local):
            return await super().get_session(key, now)
        if not isinstance(raw, bytes):
            return None
        expires_at, doc = entry(raw)
        return doc if expires_at > now and isinstance(doc, dict) else None

    async def put_session(self, key: str, doc: dict[str, Any], expires_at: float, max_sessions: int) -> None:
        """One script (or a part of the current :meth:`batch`)."""
        value = fnum(expires_at).encode() + b" " + orjson.dumps(doc)
        keys = [self._k("s", key), self._k("S"), self._k("Sseq")]
        command = _S.put_budgeted(keys, [key, value, px(expires_at), max(1, max_sessions), self._k("s", "")])

        async def local_fallback() -> None:
            await MemoryStore.put_session(self, key, doc, expires_at, max_sessions)

        await self._write(_Write((command,), local_fallback))

    # -- response cache -------------------------------------------------------------------------------
    async def put_cached(self, key: str, doc: dict[str, Any], expires_at: float) -> None:
        value = fnum(expires_at).encode() + b" " + orjson.dumps(doc)
        keys = [self._k("c", key), self._k("C"), self._k("Cseq")]
        command = _S.put_budgeted(keys, [key, value, px(expires_at), self._cache_budget, self._k("c", "")])
        if isinstance(await self._run(command), _Local):
            await super().put_cached(key, doc, expires_at)

    async def delete_cached(self, keys: list[str]) -> None:
        await super().delete_cached(keys)
        if not keys:
            return
        names = [self._k("c", k) for k in keys]
        await self._run(("MULTI",), ("DEL", *names), ("ZREM", self._k("C"), *keys), ("EXEC",))

    async def clear_cached(self) -> None:
        await super().clear_cached()
        await self._run(_S.clear_cached([self._k("C"), self._k("Cseq")], [self._k("c", "")]))

    async def get_cached(self, key: str, now: float) -> tuple[float, dict[str, Any]] | None:
        raw = await self._run1(("GET", self._k("c", key)))
        if isinstance(raw, _Local):
            return await super().get_cached(key, now)
        if not isinstance(raw, bytes):
            return None
        expires_at, doc = entry(raw)
        return (expires_at, doc) if expires_at > now and isinstance(doc, dict) else None

    async def load_cached(self, now: float, limit: int) -> list[tuple[str, float, dict[str, Any]]]:
        if limit > 0:
            self._cache_budget = limit
        command = _S.load_cached([self._k("C")], [fnum(now), int(limit), self._k("c", "")])
        flat = await self._run1(command)
        if isinstance(flat, _Local):
            return await super().load_cached(now, limit)
        out: list[tuple[str, float, dict[str, Any]]] = []
        for i in range(len(flat) - 2, -1, -2):  # newest first from Redis: least recently stored first here
            expires_at, doc = entry(flat[i + 1])
            if isinstance(doc, dict):
                out.append((text(flat[i]), expires_at, doc))
        return out
