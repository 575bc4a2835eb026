"""RedisHotStore against a real Redis (127.0.0.1:6379): the hot-state behaviour MemoryStore is held to,
shared between instances, atomic check-and-lease, and degradation when Redis goes away.

Every test has its own namespace (``t_<hex>``) and deletes its keys afterwards. Redis keeps TTLs on the
wall clock while the store compares with the caller's ``now``, so ``T0`` here is a whole minute just
ahead of the wall clock (every logical expiry then lies in Redis' future too).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from freellm.config import ModelLimits
from freellm.routing.limits import check_limits
from freellm.store.base import CooldownRecord, StateStore, UsageSnapshot, key_scope, within_limits
from freellm.store.memory import MemoryStore
from freellm.store.redis_link import RedisLink, Script
from freellm.store.redis_store import RedisHotStore, RedisStartError, redact_url

REDIS_URL = "redis://127.0.0.1:6379/0"
T0 = float((int(time.time()) // 60 + 2) * 60)
DAY = 86_400.0
A = key_scope("groq", "llama-3.3-70b", "k1")
B = key_scope("groq", "llama-3.3-70b", "k2")

Maker = Callable[..., Awaitable[RedisHotStore]]


def new_namespace() -> str:
    return f"t_{uuid.uuid4().hex}"


async def delete_namespace(ns: str) -> None:
    """SCAN + DEL every ``{ns}:*`` key."""
    client = aioredis.from_url(REDIS_URL)
    try:
        batch: list[Any] = []
        async for key in client.scan_iter(match=f"{ns}:*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                await client.delete(*batch)
                batch = []
        if batch:
            await client.delete(*batch)
    finally:
        await client.aclose()


async def namespace_keys(ns: str) -> list[str]:
    client = aioredis.from_url(REDIS_URL, decode_responses=True)
    try:
        return sorted([k async for k in client.scan_iter(match=f"{ns}:*")])
    finally:
        await client.aclose()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class RedisProxy:
    """A TCP proxy to Redis the test controls: ``pause()`` holds every byte (Redis looks silent),
    ``resume()`` lets them through again, ``close()`` stops listening (connections are refused)."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 6379)) -> None:
        self._target = target
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.requests = 0
        """Writes the clients sent (one per command or pipeline: a round trip each)."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self, port: int = 0) -> RedisProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        for src, dst, upward in ((reader, up_writer, True), (up_reader, writer, False)):
            task = asyncio.create_task(self._pipe(src, dst, upward))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, upward: bool) -> None:
        try:
            while data := await src.read(65536):
                if upward:
                    self.requests += 1
                await self._flowing.wait()
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.close()


async def eventually(check: Callable[[], Awaitable[bool]], deadline_s: float = 15.0) -> None:
    """Poll ``check`` until it holds (a deadline, not a sleep standing in for synchronisation)."""
    end = time.monotonic() + deadline_s
    while not await check():
        assert time.monotonic() < end, "condition not reached before the deadline"
        await asyncio.sleep(0.02)


@pytest.fixture
async def namespace() -> AsyncIterator[str]:
    ns = new_namespace()
    yield ns
    await delete_namespace(ns)


@pytest.fixture
async def make_redis(namespace: str) -> AsyncIterator[Maker]:
    """Open RedisHotStores (on the test's namespace unless told otherwise); all closed afterwards."""
    opened: list[RedisHotStore] = []

    async def make(
        url: str = REDIS_URL, *, ns: str | None = None, timeout_ms: int = 250, **kw: Any
    ) -> RedisHotStore:
        store = RedisHotStore(url, namespace=ns or namespace, timeout_ms=timeout_ms, **kw)
        await store.open()
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


@pytest.fixture(params=["memory", "redis"])
async def hot(request: pytest.FixtureRequest, make_redis: Maker) -> AsyncIterator[MemoryStore]:
    """The hot-state cases below run against both: RedisHotStore must answer exactly as MemoryStore."""
    if request.param == "memory":
        store = MemoryStore()
        await store.open()
        yield store
        await store.close()
    else:
        store = await make_redis()
        yield store
        assert store.health() == {}, "the Redis store fell back to local state during the test"


# -- the shared hot-state cases (MemoryStore's, tests/unit/test_store.py) -----------------------------


async def test_implements_protocol(hot: MemoryStore) -> None:
    assert isinstance(hot, StateStore)


async def test_cooldown_set_get_expire(hot: MemoryStore) -> None:
    assert await hot.get_cooldown(A, T0) is None
    rec = CooldownRecord(until=T0 + 90, source="heuristic", reason="429")
    await hot.set_cooldown(A, rec)
    assert await hot.get_cooldown(A, T0) == rec
    assert await hot.get_cooldown(A, T0 + 89.9) == rec
    assert await hot.get_cooldown(B, T0) is None
    assert await hot.get_cooldown(A, T0 + 90) is None
    assert await hot.active_cooldowns(T0 + 90) == {}


async def test_cooldown_never_shortened(hot: MemoryStore) -> None:
    long = CooldownRecord(until=T0 + 86_400, source="credit", reason="402")
    await hot.set_cooldown(A, long)
    await hot.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic"))
    assert await hot.get_cooldown(A, T0) == long
    longer = CooldownRecord(until=T0 + 2 * 86_400, source="authoritative", reason="Retry-After")
    await hot.set_cooldown(A, longer)
    assert await hot.get_cooldown(A, T0) == longer
    same = CooldownRecord(until=longer.until, source="tier", reason="403")
    await hot.set_cooldown(A, same)
    assert await hot.get_cooldown(A, T0) == same


async def test_cooldown_after_expiry_can_be_shorter(hot: MemoryStore) -> None:
    await hot.set_cooldown(A, CooldownRecord(until=T0 + 10, source="heuristic"))
    assert await hot.get_cooldown(A, T0 + 20) is None
    short = CooldownRecord(until=T0 + 25, source="heuristic")
    await hot.set_cooldown(A, short)
    assert await hot.get_cooldown(A, T0 + 20) == short


async def test_cooldown_clear_and_active(hot: MemoryStore) -> None:
    a = CooldownRecord(until=T0 + 90.125, source="heuristic")
    b = CooldownRecord(until=T0 + 600, source="bench", reason="model bench — ünïcode")
    await hot.set_cooldown(A, a)
    await hot.set_cooldown(B, b)
    assert await hot.active_cooldowns(T0) == {A: a, B: b}
    assert await hot.active_cooldowns(T0 + 100) == {B: b}
    await hot.clear_cooldown(B)
    await hot.clear_cooldown(B)
    assert await hot.active_cooldowns(T0) == {}
    assert await hot.get_cooldown(B, T0) is None


async def test_usage_empty(hot: MemoryStore) -> None:
    assert await hot.usage(A, T0) == UsageSnapshot()


async def test_usage_minute_window(hot: MemoryStore) -> None:
    await hot.record_usage(A, 100, T0 + 0.2)
    await hot.record_usage(A, 50, T0 + 0.7)
    u = await hot.usage(A, T0 + 1)
    assert (u.requests_minute, u.tokens_minute, u.requests_day, u.tokens_day) == (2, 150, 2, 150)
    assert (u.leased_requests, u.leased_tokens) == (0, 0)
    assert u.minute_frees_at == T0 + 61
    assert u.day_frees_at == T0 + 60 + DAY
    u = await hot.usage(A, T0 + 60.9)
    assert (u.requests_minute, u.tokens_minute) == (2, 150)
    u = await hot.usage(A, T0 + 61)
    assert (u.requests_minute, u.tokens_minute, u.requests_day, u.tokens_day) == (0, 0, 2, 150)
    assert u.minute_frees_at is None
    assert await hot.usage(B, T0 + 1) == UsageSnapshot()


async def test_usage_minute_window_slides(hot: MemoryStore) -> None:
    for i in range(120):
        await hot.record_usage(A, 10, T0 + i + 0.5)
    u = await hot.usage(A, T0 + 120)
    assert (u.requests_minute, u.tokens_minute, u.requests_day, u.tokens_day) == (60, 600, 120, 1200)
    assert u.minute_frees_at == T0 + 61 + 60  # second 60's bucket is the oldest left


async def test_usage_day_window_slides(hot: MemoryStore) -> None:
    await hot.record_usage(A, 1000, T0)
    await hot.record_usage(A, 2000, T0 + 3600)
    await hot.record_usage(A, 4000, T0 + 7200)
    u = await hot.usage(A, T0 + DAY + 59.9)
    assert (u.requests_day, u.tokens_day) == (3, 7000)
    u = await hot.usage(A, T0 + DAY + 60)
    assert (u.requests_day, u.tokens_day) == (2, 6000)
    assert u.requests_minute == 0
    assert u.day_frees_at == T0 + 3660 + DAY
    u = await hot.usage(A, T0 + DAY + 3600)
    assert (u.requests_day, u.tokens_day) == (2, 6000)
    assert await hot.usage(A, T0 + DAY + 7260) == UsageSnapshot()


async def test_usage_late_now_folds_into_newest_bucket(hot: MemoryStore) -> None:
    await hot.record_usage(A, 10, T0 + 5.5)
    await hot.record_usage(A, 20, T0 + 3.2)  # a caller's clock slightly behind: counted with the newest
    u = await hot.usage(A, T0 + 6)
    assert (u.requests_minute, u.tokens_minute, u.minute_frees_at) == (2, 30, T0 + 66)
    assert (await hot.usage(A, T0 + 65.9)).requests_minute == 2
    assert (await hot.usage(A, T0 + 66)).requests_minute == 0


async def test_usage_scopes_independent(hot: MemoryStore) -> None:
    await hot.record_usage(A, 5, T0)
    await hot.record_usage(B, 7, T0)
    await hot.record_usage(B, 7, T0)
    assert (await hot.usage(A, T0)).requests_minute == 1
    assert (await hot.usage(B, T0)).tokens_day == 14


async def test_leases_counted_and_released(hot: MemoryStore) -> None:
    l1 = await hot.acquire_lease(A, 100, T0, 120)
    l2 = await hot.acquire_lease(A, 200, T0, 120)
    l3 = await hot.acquire_lease(B, 300, T0, 120)
    assert len({l1, l2, l3}) == 3
    assert await hot.lease_count() == 3
    u = await hot.usage(A, T0 + 1)
    assert (u.leased_requests, u.leased_tokens) == (2, 300)
    assert (u.requests_minute, u.requests_day) == (0, 0)
    await hot.release_lease(A, l1)
    u = await hot.usage(A, T0 + 1)
    assert (u.leased_requests, u.leased_tokens) == (1, 200)
    await hot.release_lease(A, l1)
    await hot.release_lease(A, "no-such-lease")
    await hot.release_lease(A, l3)  # another scope's lease: nothing happens
    assert await hot.lease_count() == 2
    await hot.release_lease(A, l2)
    await hot.release_lease(B, l3)
    assert await hot.lease_count() == 0
    assert await hot.usage(A, T0 + 2) == UsageSnapshot()


async def test_leases_expire(hot: MemoryStore) -> None:
    lease = await hot.acquire_lease(A, 100, T0, 120)
    await hot.acquire_lease(A, 50, T0 + 100, 120)
    u = await hot.usage(A, T0 + 119.9)
    assert (u.leased_requests, u.leased_tokens) == (2, 150)
    u = await hot.usage(A, T0 + 120)
    assert (u.leased_requests, u.leased_tokens) == (1, 50)
    assert await hot.lease_count() == 1
    await hot.release_lease(A, lease)
    u = await hot.usage(A, T0 + 220)
    assert (u.leased_requests, u.leased_tokens) == (0, 0)
    assert await hot.lease_count() == 0


async def test_leases_and_usage_together(hot: MemoryStore) -> None:
    lease = await hot.acquire_lease(A, 400, T0, 120)
    await hot.record_usage(A, 350, T0 + 2)
    await hot.release_lease(A, lease)
    u = await hot.usage(A, T0 + 3)
    assert u.requests_minute == 1 and u.tokens_minute == 350 and u.leased_requests == 0


@pytest.mark.parametrize(
    ("limits", "fits"),
    [
        (ModelLimits(), [True] * 6),
        (ModelLimits(rpm=3), [True, True, False, False, False, False]),  # 1 used + 2 leased
        (ModelLimits(rpd=2), [True, False, False, False, False, False]),
        (ModelLimits(tpm=450), [True, True, True, True, True, False]),  # 100 used, then 100+100+50+50+50
        (ModelLimits(tpd=300, rpm=10), [True, True, False, False, False, False]),  # 300 is not over 300
    ],
)
async def test_acquire_lease_within(hot: MemoryStore, limits: ModelLimits, fits: list[bool]) -> None:
    # One recorded request of 100 tokens is usage in both windows; then leases of 50 pile up.
    await hot.record_usage(A, 100, T0)
    await hot.record_usage(B, 999, T0)  # another scope's usage never counts
    granted: list[bool] = []
    for i in range(6):
        lease, usage = await hot.acquire_lease_within(A, 100 if i < 2 else 50, T0 + 1, 120, limits)
        assert usage.requests_minute == 1 and usage.leased_requests == sum(granted)
        assert (lease is not None) == within_limits(limits, usage, 100 if i < 2 else 50)
        granted.append(lease is not None)
    assert granted == fits, f"{limits}: {granted}"
    assert await hot.lease_count() == sum(fits)


async def test_acquire_lease_within_frees_with_the_window_and_release(hot: MemoryStore) -> None:
    limits = ModelLimits(rpm=2)
    await hot.record_usage(A, 1, T0)
    lease, _ = await hot.acquire_lease_within(A, 1, T0, 120, limits)
    assert lease is not None
    refused, usage = await hot.acquire_lease_within(A, 1, T0 + 1, 120, limits)
    assert refused is None and (usage.requests_minute, usage.leased_requests) == (1, 1)
    assert check_limits(limits, usage, 1).retry_at == T0 + 61  # the router's retryAtMs hint
    await hot.release_lease(A, lease)
    again, _ = await hot.acquire_lease_within(A, 1, T0 + 1, 120, limits)
    assert again is not None
    assert (await hot.acquire_lease_within(A, 1, T0 + 2, 120, limits))[0] is None
    assert (await hot.acquire_lease_within(A, 1, T0 + 61, 120, limits))[0] is not None  # the usage aged out


async def test_events_window(hot: MemoryStore) -> None:
    assert await hot.count_events("bench", A, T0, 900) == 0
    assert await hot.add_event("bench", A, T0, 900) == 1
    assert await hot.add_event("bench", A, T0 + 100, 900) == 2
    assert await hot.add_event("bench", A, T0 + 899, 900) == 3
    assert await hot.add_event("bench", A, T0 + 950, 900) == 3
    assert await hot.count_events("bench", A, T0 + 950, 900) == 3
    assert await hot.count_events("bench", A, T0 + 950, 100) == 2
    assert await hot.count_events("bench", A, T0 + 5000, 900) == 0
    assert await hot.count_events("bench", B, T0 + 950, 900) == 0
    assert await hot.count_events("ladder", A, T0 + 950, 900) == 0


async def test_events_same_instant_counted_apart(hot: MemoryStore) -> None:
    assert [await hot.add_event("429", A, T0, 60) for _ in range(3)] == [1, 2, 3]


async def test_events_longer_window_kept(hot: MemoryStore) -> None:
    await hot.add_event("hit", A, T0, 3600)
    await hot.add_event("hit", A, T0 + 10, 3600)
    assert await hot.add_event("hit", A, T0 + 20, 15) == 2
    assert await hot.count_events("hit", A, T0 + 20, 3600) == 3


async def test_events_clear(hot: MemoryStore) -> None:
    await hot.add_event("429", A, T0, 3600)
    await hot.add_event("429", B, T0, 3600)
    await hot.clear_events("429", A)
    await hot.clear_events("429", A)
    assert await hot.count_events("429", A, T0, 3600) == 0
    assert await hot.count_events("429", B, T0, 3600) == 1
    assert await hot.add_event("429", A, T0 + 1, 3600) == 1


async def test_sessions_put_get_expire(hot: MemoryStore) -> None:
    assert await hot.get_session("s1", T0) is None
    doc = {"route": "groq/llama", "turns": 2, "memory": [{"role": "assistant", "content": "hé"}]}
    await hot.put_session("s1", doc, T0 + 100, 10)
    assert await hot.get_session("s1", T0) == doc
    assert await hot.get_session("s1", T0 + 99.9) == doc
    assert await hot.get_session("s1", T0 + 100) is None
    replaced = {"route": "cerebras/qwen"}
    await hot.put_session("s1", replaced, T0 + 200, 10)
    assert await hot.get_session("s1", T0 + 150) == replaced


async def test_sessions_budget_drops_least_recently_stored(hot: MemoryStore) -> None:
    for name in ("a", "b", "c"):
        await hot.put_session(name, {"n": name}, T0 + 100, 3)
    await hot.put_session("a", {"n": "a2"}, T0 + 100, 3)  # re-stored: now the newest
    await hot.put_session("d", {"n": "d"}, T0 + 100, 3)  # over budget: b goes
    assert [await hot.get_session(n, T0) for n in "abcd"] == [{"n": "a2"}, None, {"n": "c"}, {"n": "d"}]
    await hot.put_session("e", {"n": "e"}, T0 + 100, 0)  # a budget under one still keeps one
    assert await hot.get_session("e", T0) == {"n": "e"}


async def test_cache_entries_put_load_delete_clear(hot: MemoryStore) -> None:
    await hot.put_cached("k1", {"body": "one"}, T0 + 100)
    await hot.put_cached("k2", {"body": "two"}, T0 + 100)
    await hot.put_cached("gone", {"body": "old"}, T0 - 1)
    await hot.put_cached("k1", {"body": "one again"}, T0 + 200)
    assert await hot.load_cached(T0, 10) == [
        ("k2", T0 + 100, {"body": "two"}),
        ("k1", T0 + 200, {"body": "one again"}),
    ]
    assert [k for k, _, _ in await hot.load_cached(T0, 1)] == ["k1"]
    assert await hot.load_cached(T0, 0) == []
    await hot.delete_cached(["k2", "unknown"])
    await hot.delete_cached([])
    assert [k for k, _, _ in await hot.load_cached(T0, 10)] == ["k1"]
    await hot.clear_cached()
    await hot.put_cached("k3", {"body": "three"}, T0 + 100)
    assert [k for k, _, _ in await hot.load_cached(T0, 10)] == ["k3"]


# -- Redis specifics: one state for every instance ---------------------------------------------------


async def test_two_instances_share_hot_state_at_once(make_redis: Maker) -> None:
    r1, r2 = await make_redis(), await make_redis()
    rec = CooldownRecord(until=T0 + 90, source="authoritative", reason="Retry-After")
    await r1.set_cooldown(A, rec)
    assert await r2.get_cooldown(A, T0) == rec
    assert await r2.active_cooldowns(T0) == {A: rec}
    await r2.set_cooldown(A, CooldownRecord(until=T0 + 5, source="heuristic"))  # never shortens r1's
    assert await r1.get_cooldown(A, T0) == rec
    await r2.clear_cooldown(A)
    assert await r1.get_cooldown(A, T0) is None

    await r1.record_usage(A, 40, T0)
    lease = await r2.acquire_lease(A, 60, T0, 120)
    u = await r1.usage(A, T0 + 1)
    assert (u.requests_minute, u.tokens_day, u.leased_requests, u.leased_tokens) == (1, 40, 1, 60)
    assert await r1.lease_count() == 1
    await r1.release_lease(A, lease)  # released by another replica than the one that took it
    assert await r2.lease_count() == 0

    assert await r1.add_event("ladder", A, T0, 3600) == 1
    assert await r2.add_event("ladder", A, T0 + 1, 3600) == 2

    await r1.put_session("conv", {"route": "groq/llama"}, T0 + 600, 100)
    assert await r2.get_session("conv", T0) == {"route": "groq/llama"}

    await r2.put_cached("ck", {"body": "{}"}, T0 + 600)
    assert await r1.load_cached(T0, 10) == [("ck", T0 + 600, {"body": "{}"})]
    await r1.delete_cached(["ck"])
    assert await r2.load_cached(T0, 10) == []


async def test_namespaces_are_separate(make_redis: Maker, namespace: str) -> None:
    other = new_namespace()
    try:
        mine, theirs = await make_redis(), await make_redis(ns=other)
        await mine.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic"))
        await mine.record_usage(A, 1, T0)
        assert await theirs.get_cooldown(A, T0) is None
        assert await theirs.usage(A, T0) == UsageSnapshot()
        assert all(k.startswith(f"{namespace}:") for k in await namespace_keys(namespace))
        assert await namespace_keys(other) == []
    finally:
        await delete_namespace(other)


async def test_check_and_lease_is_atomic_across_instances(make_redis: Maker) -> None:
    """rpm 4, twelve concurrent attempts from two instances: exactly four leases."""
    r1, r2 = await make_redis(), await make_redis()
    limits = ModelLimits(rpm=4)
    now = time.time()
    results = await asyncio.gather(
        *(
            store.acquire_lease_within(A, 10, now, 120, limits)
            for store in itertools.islice(itertools.cycle((r1, r2)), 12)
        )
    )
    leases = [lease for lease, _ in results if lease is not None]
    assert len(leases) == 4 and len(set(leases)) == 4
    assert await r1.lease_count() == 4
    assert (await r2.usage(A, now)).leased_requests == 4
    for lease in leases:
        await r2.release_lease(A, lease)
    assert await r1.lease_count() == 0


async def test_leases_expire_on_the_wall_clock(make_redis: Maker) -> None:
    """A lease whose holder died goes by itself: the next reads after its ttl do not count it."""
    r1, r2 = await make_redis(), await make_redis()
    await r1.acquire_lease(A, 10, time.time(), 0.2)

    async def gone() -> bool:
        return (await r2.usage(A, time.time())).leased_requests == 0

    await eventually(gone, 5)
    assert await r2.lease_count() == 0


async def test_cache_budget_is_shared(make_redis: Maker) -> None:
    """The cache's ``max_entries`` (told by its start-up ``load_cached``) bounds the entries in Redis."""
    r1, r2 = await make_redis(), await make_redis()
    assert await r1.load_cached(T0, 2) == []
    await r1.put_cached("a", {"n": 1}, T0 + 100)
    await r2.put_cached("b", {"n": 2}, T0 + 100)
    await r1.put_cached("c", {"n": 3}, T0 + 100)
    assert [k for k, _, _ in await r2.load_cached(T0, 10)] == ["b", "c"]


async def test_keys_carry_ttls(make_redis: Maker, namespace: str) -> None:
    """Nothing the hot state writes lives forever (Redis keeps nothing on disk, but memory is finite)."""
    r = await make_redis()
    now = time.time()
    await r.record_usage(A, 1, now)
    await r.acquire_lease(A, 1, now, 30)
    await r.add_event("429", A, now, 60)
    await r.put_session("s", {}, now + 60, 10)
    await r.put_cached("c", {}, now + 60)
    client = aioredis.from_url(REDIS_URL, decode_responses=True)
    try:
        for key in await namespace_keys(namespace):
            ttl = await client.pttl(key)
            short = key.rpartition(":")[2]
            if short in {"L", "lnow", "S", "Sseq", "C", "Cseq", "cd"}:
                continue  # namespace-wide indexes, bounded by their budgets and pruned on use
            assert 0 < ttl <= (DAY + 180) * 1000, key
    finally:
        await client.aclose()


# -- degradation ------------------------------------------------------------------------------------


async def test_refused_at_start_serves_locally(make_redis: Maker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "freellm.store")
    store = await make_redis(f"redis://user:s3cret@127.0.0.1:{closed_port()}/0", reconnect_first_s=60)
    assert store.health() == {"state": "local"}
    await store.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic"))
    assert (await store.get_cooldown(A, T0)) is not None
    await store.record_usage(A, 5, T0)
    lease, usage = await store.acquire_lease_within(A, 1, T0, 120, ModelLimits(rpm=2))
    assert lease is not None and usage.requests_minute == 1
    assert await store.lease_count() == 1
    await store.release_lease(A, lease)
    await store.put_session("s", {"x": 1}, T0 + 10, 5)
    assert await store.get_session("s", T0) == {"x": 1}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per transition, not per operation
    assert "s3cret" not in caplog.text and "***@127.0.0.1" in caplog.text


async def test_stall_falls_back_within_the_timeout_and_recovers(
    make_redis: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "freellm.store")
    proxy = await RedisProxy().start()
    try:
        store = await make_redis(proxy.url, timeout_ms=150, reconnect_first_s=0.05, reconnect_max_s=0.2)
        direct = await make_redis()
        now = time.time()
        await store.record_usage(A, 1, now)
        assert store.health() == {}
        proxy.pause()
        started = time.monotonic()
        await store.record_usage(A, 1, now)  # Redis is silent: counted locally after ~150 ms
        assert time.monotonic() - started < 1.0
        assert store.health() == {"state": "local"}
        started = time.monotonic()
        for _ in range(20):  # degraded: Redis is not tried again per operation
            await store.usage(A, now)
        assert time.monotonic() - started < 0.1
        assert (await direct.usage(A, now)).requests_minute == 1  # the stalled write never reached Redis
        proxy.resume()

        async def recovered() -> bool:
            return store.health() == {}

        await eventually(recovered)
        # (the held bytes of the timed-out call reach Redis now: a write that timed out may yet land)
        rec = CooldownRecord(until=T0 + 90, source="heuristic")
        await store.set_cooldown(B, rec)
        assert await direct.get_cooldown(B, T0) == rec
        assert store.health() == {}
        levels = [r.levelno for r in caplog.records if r.name == "freellm.store"]
        assert levels == [logging.WARNING, logging.INFO]
    finally:
        await proxy.close()


async def test_proxy_closed_later_then_back(make_redis: Maker) -> None:
    """Refused mid-run (the proxy stops listening and drops its connections), then back on the same port."""
    proxy = await RedisProxy().start()
    store = await make_redis(proxy.url, reconnect_first_s=0.05, reconnect_max_s=0.2)
    await store.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic"))
    port = proxy.port
    await proxy.close()
    assert await store.get_cooldown(B, T0) is None  # the first failure degrades …
    assert store.health() == {"state": "local"}
    revived = await RedisProxy().start(port)
    try:

        async def recovered() -> bool:
            return store.health() == {}

        await eventually(recovered)
        assert await store.get_cooldown(A, T0) is not None  # … and Redis' state is used again
    finally:
        await revived.close()


async def test_refused_login_or_database_is_a_start_error(namespace: str) -> None:
    for url in ("redis://bob:hunter2@127.0.0.1:6379/0", "redis://127.0.0.1:6379/99"):
        store = RedisHotStore(url, namespace=namespace, timeout_ms=500)
        with pytest.raises(RedisStartError) as info:
            await store.open()
        assert "hunter2" not in str(info.value)
        await store.close()


# -- helpers ------------------------------------------------------------------------------------------


def test_redact_url() -> None:
    assert redact_url("redis://user:pw@cache.internal:6379/0") == "redis://***@cache.internal:6379/0"
    assert redact_url("rediss://:pw@h/1") == "rediss://***@h/1"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redact_url("unix:///run/redis.sock") == "unix:///run/redis.sock"
    assert "pw" not in redact_url("redis://u:pw@h:1/0?password=pw")


def test_within_limits_is_check_limits() -> None:
    """The store's yes/no (and the Lua copy of it, exercised above) is the router's verdict."""
    values = (None, 0, 1, 3)
    for rpm, rpd, tpm, tpd in itertools.product(values, (None, 2), (None, 50, 100), (None, 120)):
        limits = ModelLimits(rpm=rpm, rpd=rpd, tpm=tpm, tpd=tpd)
        for used, leased, tokens in itertools.product((0, 1, 2), (0, 1), (0, 40, 60)):
            usage = UsageSnapshot(
                requests_minute=used,
                requests_day=used,
                tokens_minute=used * 30,
                tokens_day=used * 30,
                leased_requests=leased,
                leased_tokens=leased * 20,
            )
            assert within_limits(limits, usage, tokens) == check_limits(limits, usage, tokens).ok


# -- the router's decision: one round trip ---------------------------------------------------------------
async def test_a_routing_decision_is_one_round_trip(make_redis: Maker) -> None:
    """``Router.pick`` on a Redis store: the model's bench, the key's cooldown, its limits and the lease
    in one script — one request to Redis per key tried, whatever the outcome."""
    from freellm.config import Settings
    from freellm.routing.catalog import Catalog
    from freellm.routing.router import Needs, Router, SkipSets
    from freellm.store.base import model_scope

    settings = Settings.model_validate(
        {
            "providers": [
                {"name": "p", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "keys": ["k1"], "models": [{"id": "m"}]}
            ],
            "chain": ["p/m"],
        }
    )
    proxy = await RedisProxy().start()
    try:
        store = await make_redis(proxy.url)
        router = Router(settings, Catalog(settings), {}, store)
        needs = Needs(estimate=10)

        async def pick() -> tuple[int, Any]:
            before = proxy.requests
            result = await router.pick(router.plan("auto"), needs, SkipSets(), time.time())
            return proxy.requests - before, result

        _, warm = await pick()  # the first call also loads the script (NOSCRIPT, SCRIPT LOAD)
        assert warm.choice is not None
        trips, granted = await pick()
        assert trips == 1 and granted.choice is not None and granted.lease_id
        await store.set_cooldown(model_scope("p", "m"), CooldownRecord(until=time.time() + 60, source="bench"))
        trips, benched = await pick()
        assert trips == 1 and benched.choice is None
        assert [d.kind for d in benched.diagnostics] == ["cooldown"] and "benched" in benched.diagnostics[0].detail
    finally:
        await proxy.close()


async def test_acquire_route_lease_reports_the_first_cooling_scope(hot: MemoryStore) -> None:
    now = time.time()
    limits = ModelLimits(rpm=1)
    await hot.set_cooldown("key-scope", CooldownRecord(until=now + 30, source="heuristic", reason="429"))
    blocked = await hot.acquire_route_lease("key-scope", 5, now, 30, limits, ("model-scope", "key-scope"))
    assert blocked.lease_id is None and blocked.cooling is not None
    assert blocked.cooling[0] == "key-scope" and blocked.cooling[1].reason == "429"
    granted = await hot.acquire_route_lease("other", 5, now, 30, limits, ("model-scope", "other"))
    assert granted.lease_id is not None and granted.cooling is None and granted.usage.leased_requests == 0
    full = await hot.acquire_route_lease("other", 5, now, 30, limits, ("model-scope", "other"))
    assert full.lease_id is None and full.cooling is None and full.usage.leased_requests == 1
    await hot.release_lease("other", granted.lease_id)


async def test_a_lease_whose_call_timed_out_is_released_in_redis_too(make_redis: Maker) -> None:
    """A stall past the timeout: the lease falls back to local memory, but the held request reaches
    Redis when the line clears — that Redis lease is released once Redis answers, so no slot leaks."""
    proxy = await RedisProxy().start()
    try:
        store = await make_redis(proxy.url, timeout_ms=150, reconnect_first_s=0.05, reconnect_max_s=0.2)
        direct = await make_redis()
        now = time.time()
        limits = ModelLimits(rpm=10)
        proxy.pause()
        lease_id, _ = await store.acquire_lease_within(A, 1, now, 60, limits)
        assert lease_id is not None and store.health() == {"state": "local"}
        await store.release_lease(A, lease_id)  # released here; Redis still away
        proxy.resume()  # the held acquire now reaches Redis: a lease nobody holds, until recovery

        async def recovered_and_clean() -> bool:
            return store.health() == {} and await direct.lease_count() == 0

        await eventually(recovered_and_clean)
        assert (await direct.usage(A, time.time())).leased_requests == 0
    finally:
        await proxy.close()


async def test_settle_lease_counts_clears_and_releases(hot: MemoryStore) -> None:
    now = time.time()
    await hot.add_event("ladder", A, now, 3600)
    lease = await hot.acquire_lease(A, 40, now, 60)
    assert (await hot.usage(A, now)).leased_requests == 1
    await hot.settle_lease(A, lease, 40, now, ("ladder", "rate_limit"))
    usage = await hot.usage(A, now)
    assert (usage.requests_minute, usage.tokens_minute, usage.leased_requests) == (1, 40, 0)
    assert await hot.count_events("ladder", A, now, 3600) == 0
    assert await hot.lease_count() == 0
    lease = await hot.acquire_lease(A, 2, now, 60)
    await hot.settle_lease(A, lease, 2, now, ())  # no streaks to clear
    usage = await hot.usage(A, now)
    assert (usage.requests_minute, usage.tokens_minute, usage.leased_requests) == (2, 42, 0)


async def test_settling_a_success_is_one_round_trip(make_redis: Maker) -> None:
    proxy = await RedisProxy().start()
    try:
        store = await make_redis(proxy.url)
        now = time.time()
        for _ in range(2):  # the second time, every script is loaded
            lease = await store.acquire_lease(A, 5, now, 60)
            before = proxy.requests
            await store.settle_lease(A, lease, 5, now, ("ladder", "rate_limit", "empty_length"))
        assert proxy.requests - before == 1
        assert await store.lease_count() == 0 and (await store.usage(A, now)).requests_minute == 2
        # Redis lost its scripts (a restart): the script is loaded and run again, counted and released once
        lease = await store.acquire_lease(A, 5, now, 60)
        client = aioredis.from_url(REDIS_URL)
        try:
            await client.script_flush()
        finally:
            await client.aclose()
        await store.settle_lease(A, lease, 5, now, ("ladder",))
        assert await store.lease_count() == 0 and (await store.usage(A, now)).requests_minute == 3
    finally:
        await proxy.close()


async def test_a_batch_sends_its_writes_in_one_round_trip(make_redis: Maker) -> None:
    """A success's booking and the session write, made inside ``batch()``, reach Redis together when it
    ends — and are visible to another instance then; another request's task is not swept in."""
    proxy = await RedisProxy().start()
    try:
        store = await make_redis(proxy.url)
        other = await make_redis()
        now = time.time()
        warm = await store.acquire_lease(A, 5, now, 60)
        await store.settle_lease(A, warm, 5, now, ("ladder",))  # loads the scripts
        await store.put_session("warm", {"route": "p/m"}, now + 60, 10)
        lease = await store.acquire_lease(A, 5, now, 60)
        before = proxy.requests
        async with store.batch():
            await store.settle_lease(A, lease, 5, now, ("ladder", "rate_limit"))
            await store.put_session("conv", {"route": "p/m"}, now + 60, 10)
            assert proxy.requests == before  # nothing sent yet
            assert await other.get_session("conv", now) is None
        assert proxy.requests - before == 1
        assert await other.get_session("conv", now) == {"route": "p/m"}
        assert await other.lease_count() == 0 and (await other.usage(A, now)).requests_minute == 2

        go = asyncio.Event()

        async def elsewhere() -> None:  # another request's task (started outside): written at once
            await go.wait()
            await store.put_session("other-conv", {"route": "q/n"}, now + 60, 10)

        task = asyncio.create_task(elsewhere())
        async with store.batch():
            go.set()
            await task
            assert await other.get_session("other-conv", now) == {"route": "q/n"}
    finally:
        await proxy.close()


# -- the link (redis_link): commands over redis-py's connections ------------------------------------


@pytest.fixture
async def link_to(namespace: str) -> AsyncIterator[Callable[..., RedisLink]]:
    """RedisLinks on their own clients (closed afterwards)."""
    clients: list[tuple[aioredis.Redis, RedisLink]] = []

    def make(url: str = REDIS_URL, scripts: tuple[Script, ...] = ()) -> RedisLink:
        client = aioredis.from_url(url, socket_timeout=None)
        link = RedisLink(client, scripts)
        clients.append((client, link))
        return link

    yield make
    for client, link in clients:
        await link.close()
        await client.aclose()


async def test_link_replies_in_order_and_an_error_reply_leaves_the_connection_aligned(
    link_to: Callable[..., RedisLink], namespace: str
) -> None:
    link = link_to()
    k, text = f"{namespace}:n", f"{namespace}:text"
    assert await link.call(("SET", k, 1), ("INCR", k), ("GET", k)) == [b"OK", 2, b"2"]
    with pytest.raises(aioredis.ResponseError):  # raised once every reply is read …
        await link.call(("SET", text, "x"), ("INCR", text), ("INCR", k))
    assert await link.call(("GET", k), ("GET", text)) == [b"3", b"x"]  # … so the next call reads its own


async def test_link_loads_a_script_redis_does_not_know(link_to: Callable[..., RedisLink], namespace: str) -> None:
    """EVALSHA of a script Redis never saw (or lost in a restart): SCRIPT LOAD and the command again,
    in the same call, one more round trip (so it runs after the call's other commands)."""
    proxy = await RedisProxy().start()
    try:
        script = Script.of(f"-- {namespace}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])")
        link = link_to(proxy.url, (script,))
        await link.call(("PING",))
        before = proxy.requests
        assert await link.call(script([f"{namespace}:n"], [5]), ("GET", f"{namespace}:n")) == [5, None]
        assert proxy.requests - before == 2
        before = proxy.requests
        assert await link.call(script([f"{namespace}:n"], [1])) == [6]
        assert proxy.requests - before == 1
    finally:
        await proxy.close()


async def test_link_call_cut_short_leaves_no_stale_reply(link_to: Callable[..., RedisLink], namespace: str) -> None:
    """A call its caller's timeout cancels (Redis silent) must not leave its reply for the next call on
    that connection: the connection is closed and the next call opens a fresh one."""
    proxy = await RedisProxy().start()
    try:
        link = link_to(proxy.url)
        k = f"{namespace}:n"
        assert await link.call(("SET", k, "before")) == [b"OK"]
        proxy.pause()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await link.call(("GET", k))
        proxy.resume()
        assert await link.call(("SET", k, "after"), ("GET", k)) == [b"OK", b"after"]
    finally:
        await proxy.close()
