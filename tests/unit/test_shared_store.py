"""Several worker processes on one data dir: rate windows, leases and cooldowns agree across them.

Two SharedSQLiteStore instances on one file stand in for two workers; ``sync()`` is called explicitly
(the background loop does the same every 0.25 s), so every step is deterministic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from freellm.store.base import CooldownRecord, key_scope
from freellm.store.factory import create_store
from freellm.store.shared import SharedSQLiteStore
from freellm.store.sqlite import SQLiteStore

T0 = 1_700_000_040.0
A = key_scope("groq", "llama", "k1")


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
async def workers(tmp_path: Path, clock: Clock) -> AsyncIterator[Callable[[int], SharedSQLiteStore]]:
    opened: list[SharedSQLiteStore] = []

    def make(index: int) -> SharedSQLiteStore:
        store = SharedSQLiteStore(
            tmp_path / "freellm.db", worker_id=f"w{index}", load_history=index == 0, clock=clock, sync_interval_s=3600
        )
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


async def two(make: Callable[[int], SharedSQLiteStore]) -> tuple[SharedSQLiteStore, SharedSQLiteStore]:
    w0, w1 = make(0), make(1)
    await w0.open()
    await w1.open()
    return w0, w1


async def test_usage_is_the_sum_over_workers_after_a_sync(workers: Callable[[int], SharedSQLiteStore]) -> None:
    w0, w1 = await two(workers)
    await w0.record_usage(A, 100, T0)
    await w0.record_usage(A, 50, T0)
    await w1.record_usage(A, 10, T0)
    await w0.sync()
    await w1.sync()
    await w0.sync()
    for w in (w0, w1):
        u = await w.usage(A, T0)
        assert (u.requests_minute, u.requests_day, u.tokens_minute, u.tokens_day) == (3, 3, 160, 160)


async def test_leases_of_another_worker_count_until_released(workers: Callable[[int], SharedSQLiteStore]) -> None:
    w0, w1 = await two(workers)
    lease = await w0.acquire_lease(A, 700, T0, 120)
    await w0.sync()
    await w1.sync()
    assert (await w1.usage(A, T0)).leased_requests == 1
    assert (await w1.usage(A, T0)).leased_tokens == 700
    await w0.release_lease(A, lease)
    await w0.sync()
    await w1.sync()
    assert (await w1.usage(A, T0)).leased_requests == 0


async def test_a_cooldown_set_by_one_worker_is_seen_by_the_other(workers: Callable[[int], SharedSQLiteStore]) -> None:
    w0, w1 = await two(workers)
    await w0.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic", reason="rate_limited"))
    assert await w1.get_cooldown(A, T0) is None
    await w1.sync()
    record = await w1.get_cooldown(A, T0)
    assert record is not None and record.until == T0 + 90


async def test_a_cooldown_cleared_by_one_worker_disappears_from_the_other(
    workers: Callable[[int], SharedSQLiteStore],
) -> None:
    w0, w1 = await two(workers)
    await w0.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic"))
    await w1.sync()
    await w0.clear_cooldown(A)
    await w1.sync()
    assert await w1.get_cooldown(A, T0) is None


async def test_a_silent_worker_stops_counting(workers: Callable[[int], SharedSQLiteStore], clock: Clock) -> None:
    w0, w1 = await two(workers)
    await w0.record_usage(A, 1, T0)
    await w0.sync()
    await w1.sync()
    assert (await w1.usage(A, T0)).requests_day == 1
    clock.t = T0 + 10  # w0 published nothing for longer than stale_after_s (it crashed)
    await w1.sync()
    assert (await w1.usage(A, T0 + 10)).requests_day == 0


async def test_only_worker_zero_reloads_history_so_a_restart_does_not_multiply_it(
    tmp_path: Path, workers: Callable[[int], SharedSQLiteStore]
) -> None:
    single = SQLiteStore(tmp_path / "freellm.db", clock=lambda: T0)
    await single.open()
    await single.record_usage(A, 40, T0)
    await single.close()
    w0, w1 = await two(workers)
    await w0.sync()
    await w1.sync()
    assert (await w1.usage(A, T0)).requests_day == 1
    assert (await w0.usage(A, T0)).requests_day == 1


def test_factory_builds_a_shared_store_for_workers(tmp_path: Path) -> None:
    store = create_store(tmp_path, worker=(1, "1-123"))
    assert isinstance(store, SharedSQLiteStore)
    assert store.worker_id == "1-123"
    assert isinstance(create_store(tmp_path), SQLiteStore) and not isinstance(create_store(tmp_path), SharedSQLiteStore)
