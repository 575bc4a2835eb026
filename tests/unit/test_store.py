"""The StateStore protocol suite, run against every embedded backend, plus SQLite persistence."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from freellm.store.base import CooldownRecord, RequestLogRow, StateStore, UsageSnapshot, key_scope
from freellm.store.factory import create_store
from freellm.store.memory import MemoryStore
from freellm.store.sqlite import SCHEMA_VERSION, SQLiteStore

T0 = 1_700_000_040.0  # a whole minute (and second), so bucket edges are easy to reason about
DAY = 86_400.0
A = key_scope("groq", "llama-3.3-70b", "k1")
B = key_scope("groq", "llama-3.3-70b", "k2")


def fixed_clock(t: float) -> Callable[[], float]:
    return lambda: t


def make_row(i: int, **kw: object) -> RequestLogRow:
    fields: dict[str, object] = {
        "request_id": f"req-{i}",
        "ts": T0 + i,
        "surface": "openai_chat",
        "requested_model": "auto",
        "route": "groq/llama-3.3-70b",
        "status": 200,
        "stream": i % 2 == 0,
        "attempts": 1,
        "latency_ms": 120 + i,
        "ttfb_ms": 40 if i % 3 else None,
        "tokens_in": 10 * i,
        "tokens_out": 5 * i,
        "error_class": None,
        "outcome": "success",
        "extra": {"trail": [f"p/m key{i}: rate_limited"], "n": i, "nested": {"ok": True}},
    }
    fields.update(kw)
    return RequestLogRow(**fields)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db", clock=fixed_clock(T0))
    await s.open()
    yield s
    await s.close()


# -- protocol suite ---------------------------------------------------------------------------------------


async def test_implements_protocol(store: MemoryStore) -> None:
    assert isinstance(store, StateStore)


async def test_cooldown_set_get_expire(store: MemoryStore) -> None:
    assert await store.get_cooldown(A, T0) is None
    rec = CooldownRecord(until=T0 + 90, source="heuristic", reason="429")
    await store.set_cooldown(A, rec)
    assert await store.get_cooldown(A, T0) == rec
    assert await store.get_cooldown(A, T0 + 89.9) == rec
    assert await store.get_cooldown(B, T0) is None
    assert await store.get_cooldown(A, T0 + 90) is None  # ends exactly at `until`
    assert await store.active_cooldowns(T0 + 90) == {}


async def test_cooldown_never_shortened(store: MemoryStore) -> None:
    long = CooldownRecord(until=T0 + 86_400, source="credit", reason="402")
    await store.set_cooldown(A, long)
    await store.set_cooldown(A, CooldownRecord(until=T0 + 90, source="heuristic"))
    assert await store.get_cooldown(A, T0) == long
    longer = CooldownRecord(until=T0 + 2 * 86_400, source="authoritative", reason="Retry-After")
    await store.set_cooldown(A, longer)
    assert await store.get_cooldown(A, T0) == longer
    same = CooldownRecord(until=longer.until, source="tier", reason="403")
    await store.set_cooldown(A, same)  # equal length: the newer record's source wins
    assert await store.get_cooldown(A, T0) == same


async def test_cooldown_after_expiry_can_be_shorter(store: MemoryStore) -> None:
    await store.set_cooldown(A, CooldownRecord(until=T0 + 10, source="heuristic"))
    assert await store.get_cooldown(A, T0 + 20) is None
    short = CooldownRecord(until=T0 + 25, source="heuristic")
    await store.set_cooldown(A, short)
    assert await store.get_cooldown(A, T0 + 20) == short


async def test_cooldown_clear_and_active(store: MemoryStore) -> None:
    a = CooldownRecord(until=T0 + 90, source="heuristic")
    b = CooldownRecord(until=T0 + 600, source="bench", reason="model bench")
    await store.set_cooldown(A, a)
    await store.set_cooldown(B, b)
    assert await store.active_cooldowns(T0) == {A: a, B: b}
    assert await store.active_cooldowns(T0 + 100) == {B: b}
    await store.clear_cooldown(B)
    await store.clear_cooldown(B)  # clearing nothing is fine
    assert await store.active_cooldowns(T0) == {}
    assert await store.get_cooldown(B, T0) is None


async def test_usage_empty(store: MemoryStore) -> None:
    assert await store.usage(A, T0) == UsageSnapshot()


async def test_usage_minute_window(store: MemoryStore) -> None:
    await store.record_usage(A, 100, T0 + 0.2)
    await store.record_usage(A, 50, T0 + 0.7)
    u = await store.usage(A, T0 + 1)
    assert (u.requests_minute, u.tokens_minute, u.requests_day, u.tokens_day) == (2, 150, 2, 150)
    assert (u.leased_requests, u.leased_tokens) == (0, 0)
    assert u.minute_frees_at == T0 + 61  # end of the 1 s bucket + 60 s
    assert u.day_frees_at == T0 + 60 + DAY  # end of the 1 min bucket + 24 h
    u = await store.usage(A, T0 + 60.9)  # conservative: still inside until the bucket has fully aged out
    assert (u.requests_minute, u.tokens_minute) == (2, 150)
    u = await store.usage(A, T0 + 61)
    assert (u.requests_minute, u.tokens_minute, u.requests_day, u.tokens_day) == (0, 0, 2, 150)
    assert u.minute_frees_at is None
    assert await store.usage(B, T0 + 1) == UsageSnapshot()


async def test_usage_minute_window_slides(store: MemoryStore) -> None:
    for i in range(120):  # one request every second for two minutes
        await store.record_usage(A, 10, T0 + i + 0.5)
    u = await store.usage(A, T0 + 120)
    # seconds 59..119 are within 60 s of T0+120 by their bucket ends (60..120 > 60)
    assert u.requests_minute == 60
    assert u.tokens_minute == 600
    assert u.requests_day == 120
    assert u.tokens_day == 1200


async def test_usage_day_window_slides(store: MemoryStore) -> None:
    await store.record_usage(A, 1000, T0)
    await store.record_usage(A, 2000, T0 + 3600)
    await store.record_usage(A, 4000, T0 + 7200)
    u = await store.usage(A, T0 + DAY + 59.9)
    assert (u.requests_day, u.tokens_day) == (3, 7000)
    u = await store.usage(A, T0 + DAY + 60)
    assert (u.requests_day, u.tokens_day) == (2, 6000)
    assert u.requests_minute == 0
    assert u.day_frees_at == T0 + 3660 + DAY
    u = await store.usage(A, T0 + DAY + 3600)
    assert (u.requests_day, u.tokens_day) == (2, 6000)
    u = await store.usage(A, T0 + DAY + 7260)
    assert u == UsageSnapshot()


async def test_usage_scopes_independent(store: MemoryStore) -> None:
    await store.record_usage(A, 5, T0)
    await store.record_usage(B, 7, T0)
    await store.record_usage(B, 7, T0)
    assert (await store.usage(A, T0)).requests_minute == 1
    assert (await store.usage(B, T0)).tokens_day == 14


async def test_leases_counted_and_released(store: MemoryStore) -> None:
    l1 = await store.acquire_lease(A, 100, T0, 120)
    l2 = await store.acquire_lease(A, 200, T0, 120)
    l3 = await store.acquire_lease(B, 300, T0, 120)
    assert len({l1, l2, l3}) == 3
    assert await store.lease_count() == 3
    u = await store.usage(A, T0 + 1)
    assert (u.leased_requests, u.leased_tokens) == (2, 300)
    assert (u.requests_minute, u.requests_day) == (0, 0)  # a lease is not usage
    await store.release_lease(A, l1)
    u = await store.usage(A, T0 + 1)
    assert (u.leased_requests, u.leased_tokens) == (1, 200)
    await store.release_lease(A, l1)  # idempotent
    await store.release_lease(A, "no-such-lease")
    await store.release_lease(A, l3)  # wrong scope: not this scope's lease, nothing happens
    assert await store.lease_count() == 2
    await store.release_lease(A, l2)
    await store.release_lease(B, l3)
    assert await store.lease_count() == 0
    assert await store.usage(A, T0 + 2) == UsageSnapshot()


async def test_leases_expire(store: MemoryStore) -> None:
    lease = await store.acquire_lease(A, 100, T0, 120)
    await store.acquire_lease(A, 50, T0 + 100, 120)
    u = await store.usage(A, T0 + 119.9)
    assert (u.leased_requests, u.leased_tokens) == (2, 150)
    u = await store.usage(A, T0 + 120)  # the first one aged out
    assert (u.leased_requests, u.leased_tokens) == (1, 50)
    assert await store.lease_count() == 1
    await store.release_lease(A, lease)  # releasing an expired lease is a no-op
    u = await store.usage(A, T0 + 220)
    assert (u.leased_requests, u.leased_tokens) == (0, 0)
    assert await store.lease_count() == 0


async def test_leases_expire_in_any_order(store: MemoryStore) -> None:
    """A lease with a shorter TTL taken after a longer one still expires on time, released leases leave
    the sums at once, and a scope's count stays right across many acquisitions and releases."""
    long = await store.acquire_lease(A, 10, T0, 300)
    await store.acquire_lease(A, 20, T0 + 1, 30)  # expires first although taken later
    u = await store.usage(A, T0 + 31)
    assert (u.leased_requests, u.leased_tokens) == (1, 10)
    ids = [await store.acquire_lease(A, 1, T0 + 40, 120) for _ in range(1000)]
    for lease in ids[::2]:
        await store.release_lease(A, lease)
    u = await store.usage(A, T0 + 50)
    assert (u.leased_requests, u.leased_tokens) == (501, 510)
    await store.release_lease(A, long)
    u = await store.usage(A, T0 + 159.9)
    assert (u.leased_requests, u.leased_tokens) == (500, 500)
    u = await store.usage(A, T0 + 160)  # the rest aged out together
    assert (u.leased_requests, u.leased_tokens) == (0, 0)
    assert await store.lease_count() == 0


async def test_leases_and_usage_together(store: MemoryStore) -> None:
    lease = await store.acquire_lease(A, 400, T0, 120)
    await store.record_usage(A, 350, T0 + 2)
    await store.release_lease(A, lease)
    u = await store.usage(A, T0 + 3)
    assert u.requests_minute == 1 and u.tokens_minute == 350 and u.leased_requests == 0


async def test_events_window(store: MemoryStore) -> None:
    assert await store.count_events("bench", A, T0, 900) == 0
    assert await store.add_event("bench", A, T0, 900) == 1
    assert await store.add_event("bench", A, T0 + 100, 900) == 2
    assert await store.add_event("bench", A, T0 + 899, 900) == 3
    assert await store.add_event("bench", A, T0 + 950, 900) == 3  # the first fell out
    assert await store.count_events("bench", A, T0 + 950, 900) == 3
    assert await store.count_events("bench", A, T0 + 950, 100) == 2
    assert await store.count_events("bench", A, T0 + 5000, 900) == 0
    assert await store.count_events("bench", B, T0 + 950, 900) == 0
    assert await store.count_events("ladder", A, T0 + 950, 900) == 0


async def test_events_longer_window_kept(store: MemoryStore) -> None:
    await store.add_event("hit", A, T0, 3600)
    await store.add_event("hit", A, T0 + 10, 3600)
    # a shorter window asked later does not drop what the longer one still needs
    assert await store.add_event("hit", A, T0 + 20, 15) == 2
    assert await store.count_events("hit", A, T0 + 20, 3600) == 3


async def test_events_clear(store: MemoryStore) -> None:
    await store.add_event("429", A, T0, 3600)
    await store.add_event("429", B, T0, 3600)
    await store.clear_events("429", A)
    await store.clear_events("429", A)
    assert await store.count_events("429", A, T0, 3600) == 0
    assert await store.count_events("429", B, T0, 3600) == 1
    assert await store.add_event("429", A, T0 + 1, 3600) == 1


async def test_settings(store: MemoryStore) -> None:
    assert await store.get_setting("client_key") is None
    await store.set_setting("client_key", "freellm-abc")
    assert await store.get_setting("client_key") == "freellm-abc"
    await store.set_setting("client_key", "freellm-def")
    assert await store.get_setting("client_key") == "freellm-def"


async def test_request_log(store: MemoryStore) -> None:
    assert await store.recent_requests() == []
    rows = [make_row(i) for i in range(5)]
    for r in rows:
        await store.log_request(r)
    assert await store.recent_requests(2) == [rows[4], rows[3]]
    assert await store.recent_requests() == rows[::-1]
    assert await store.recent_requests(0) == []


def response_doc(rid: str, text: str = "hello") -> dict[str, object]:
    return {"v": 1, "response": {"id": rid, "object": "response", "output_text": text}, "input": [], "output": []}


async def test_responses_put_get_delete(store: MemoryStore) -> None:
    assert await store.get_response("resp_1", T0) is None
    doc = response_doc("resp_1")
    await store.put_response("resp_1", doc, T0 + 100)
    assert await store.get_response("resp_1", T0) == doc
    assert await store.get_response("resp_2", T0) is None
    replaced = response_doc("resp_1", "again")
    await store.put_response("resp_1", replaced, T0 + 100)
    assert await store.get_response("resp_1", T0) == replaced
    assert await store.delete_response("resp_1", T0) is True
    assert await store.get_response("resp_1", T0) is None
    assert await store.delete_response("resp_1", T0) is False  # already gone
    assert await store.delete_response("resp_never", T0) is False


async def test_responses_expire(store: MemoryStore) -> None:
    await store.put_response("resp_1", response_doc("resp_1"), T0 + 100)
    assert await store.get_response("resp_1", T0 + 99.9) is not None
    assert await store.get_response("resp_1", T0 + 100) is None  # ends exactly at expires_at
    await store.put_response("resp_2", response_doc("resp_2"), T0 + 100)
    assert await store.delete_response("resp_2", T0 + 200) is False  # an expired one is not "deleted"
    assert await store.get_response("resp_2", T0) is None


async def test_cache_entries_put_load_delete_clear(store: MemoryStore) -> None:
    await store.put_cached("k1", {"body": "one"}, T0 + 100)
    await store.put_cached("k2", {"body": "two"}, T0 + 100)
    await store.put_cached("gone", {"body": "old"}, T0 - 1)
    await store.put_cached("k1", {"body": "one again"}, T0 + 200)  # re-stored: now the newest
    assert await store.load_cached(T0, 10) == [("k2", T0 + 100, {"body": "two"}), ("k1", T0 + 200, {"body": "one again"})]
    assert [k for k, _, _ in await store.load_cached(T0, 1)] == ["k1"]
    await store.delete_cached(["k2", "unknown"])
    assert [k for k, _, _ in await store.load_cached(T0, 10)] == ["k1"]
    await store.clear_cached()
    await store.put_cached("k3", {"body": "three"}, T0 + 100)
    assert [k for k, _, _ in await store.load_cached(T0, 10)] == ["k3"]


# -- MemoryStore specifics ----------------------------------------------------------------------------


async def test_memory_stays_bounded() -> None:
    s = MemoryStore(request_log_size=100, event_cap=50)
    for i in range(200_000):  # ~2.3 days at 1 request/s
        await s.record_usage(A, 1, T0 + i)
        if i % 1000 == 0:
            await s.add_event("429", A, T0 + i, 10 * DAY)
    for i in range(300):
        await s.log_request(make_row(i))
    su = s._usage[A]
    assert len(su.minute.buckets) <= 61
    assert len(su.day.buckets) <= 1441
    assert len(s._events[("429", A)].times) == 50
    assert len(await s.recent_requests(1000)) == 100
    u = await s.usage(A, T0 + 200_000)
    assert u.requests_minute == 60  # seconds 199 940 … 199 999 (their buckets end after now - 60)
    assert 86_400 <= u.requests_day <= 86_460


async def test_memory_responses_bounded() -> None:
    s = MemoryStore(response_cap=3)
    for i in range(5):
        await s.put_response(f"resp_{i}", response_doc(f"resp_{i}"), T0 + 100)
    assert [await s.get_response(f"resp_{i}", T0) is not None for i in range(5)] == [False, False, True, True, True]


async def test_memory_stores_independent() -> None:
    s1, s2 = MemoryStore(), MemoryStore()
    await s1.record_usage(A, 10, T0)
    await s1.set_setting("x", "1")
    l1 = await s1.acquire_lease(A, 1, T0, 60)
    l2 = await s2.acquire_lease(A, 1, T0, 60)
    assert l1 != l2
    assert await s2.usage(A, T0) == UsageSnapshot(leased_requests=1, leased_tokens=1)
    assert await s2.get_setting("x") is None


async def test_lease_sweep_drops_abandoned_scopes() -> None:
    s = MemoryStore()
    for i in range(2048):  # each scope's lease is abandoned and never read again
        await s.acquire_lease(f"scope-{i}", 1, T0 + i, 10)
    assert len(s._leases) < 1100  # swept at the 1024th acquisition
    assert await s.lease_count() == 10  # the rest had expired by the newest `now`


# -- SQLiteStore persistence ----------------------------------------------------------------------


def db_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


async def test_sqlite_persists_across_restart(tmp_path: Path) -> None:
    path = tmp_path / "data" / "freellm.db"
    s1 = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)  # only close() flushes
    await s1.open()
    long = CooldownRecord(until=T0 + 600, source="authoritative", reason="daily quota")
    await s1.set_cooldown(A, long)
    await s1.set_cooldown(B, CooldownRecord(until=T0 + 5, source="heuristic"))  # expired at reopen
    await s1.set_cooldown("gone", CooldownRecord(until=T0 + 900, source="heuristic"))
    await s1.clear_cooldown("gone")
    await s1.record_usage(A, 100, T0 - 7200)
    await s1.record_usage(A, 200, T0 - 30)
    await s1.record_usage(A, 300, T0 + 1)
    await s1.record_usage(B, 1, T0 - DAY - 120)  # already outside the 24 h window at reopen
    await s1.add_event("ladder", A, T0 - 100, DAY)
    await s1.add_event("ladder", A, T0, DAY)
    await s1.add_event("stale", A, T0 - 2 * DAY, 3 * DAY)
    await s1.add_event("cleared", A, T0, DAY)
    await s1.clear_events("cleared", A)
    await s1.set_setting("client_key", "freellm-123")
    rows = [make_row(i) for i in range(3)]
    for r in rows:
        await s1.log_request(r)
    lease = await s1.acquire_lease(A, 10, T0, 120)
    assert lease
    await s1.close()
    await s1.close()  # idempotent

    s2 = SQLiteStore(path, clock=fixed_clock(T0 + 10))
    await s2.open()
    try:
        assert await s2.get_cooldown(A, T0 + 10) == long
        assert await s2.get_cooldown(B, T0 + 1) is None  # expired before reopening: not reloaded
        assert await s2.get_cooldown("gone", T0 + 10) is None
        assert await s2.active_cooldowns(T0 + 10) == {A: long}
        u = await s2.usage(A, T0 + 10)
        assert (u.requests_day, u.tokens_day) == (3, 600)
        # after a restart the minute window is rebuilt from minute buckets, conservatively
        assert (u.requests_minute, u.tokens_minute) == (2, 500)
        assert (u.leased_requests, u.leased_tokens) == (0, 0)  # leases die with the process
        assert await s2.lease_count() == 0
        assert await s2.usage(B, T0 + 10) == UsageSnapshot()
        assert await s2.count_events("ladder", A, T0 + 10, DAY) == 2
        assert await s2.count_events("stale", A, T0 + 10, 3 * DAY) == 0  # beyond the event retention
        assert await s2.count_events("cleared", A, T0 + 10, DAY) == 0
        assert await s2.get_setting("client_key") == "freellm-123"
        assert await s2.recent_requests() == rows[::-1]
        assert await s2.recent_requests(1) == [rows[2]]
    finally:
        await s2.close()


async def test_sqlite_usage_keeps_counting_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, clock=fixed_clock(T0))
    await s1.open()
    await s1.record_usage(A, 10, T0 + 5)
    await s1.flush()
    await s1.record_usage(A, 10, T0 + 6)  # same minute: the upsert adds to the stored bucket
    await s1.close()
    s2 = SQLiteStore(path, clock=fixed_clock(T0 + 30))
    await s2.open()
    await s2.record_usage(A, 10, T0 + 40)
    await s2.close()
    assert db_rows(path, "SELECT scope, minute, requests, tokens FROM usage") == [(A, int(T0 // 60), 3, 30)]
    s3 = SQLiteStore(path, clock=fixed_clock(T0 + 3600))
    await s3.open()
    u = await s3.usage(A, T0 + 3600)
    assert (u.requests_minute, u.requests_day, u.tokens_day) == (0, 3, 30)
    await s3.close()


async def test_sqlite_flush_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    await s.open()
    try:
        assert db_rows(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [
            (str(SCHEMA_VERSION),)
        ]
        assert db_rows(path, "PRAGMA journal_mode") == [("wal",)]
        await s.log_request(make_row(1))
        await s.set_setting("k", "v")
        assert db_rows(path, "SELECT count(*) FROM requests") == [(0,)]  # written behind
        await s.flush()
        assert db_rows(path, "SELECT count(*) FROM requests") == [(1,)]
        assert db_rows(path, "SELECT value FROM settings WHERE name = 'k'") == [("v",)]
        await s.flush()  # nothing pending: no-op
        assert db_rows(path, "SELECT count(*) FROM requests") == [(1,)]
    finally:
        await s.close()


async def test_sqlite_background_flush(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=0.02)
    await s.open()
    try:
        await s.log_request(make_row(7))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if db_rows(path, "SELECT count(*) FROM requests") == [(1,)]:
                break
        assert db_rows(path, "SELECT request_id FROM requests") == [("req-7",)]
    finally:
        await s.close()


async def test_sqlite_request_columns(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0))
    await s.open()
    row = make_row(3, status=429, error_class="rate_limited", outcome="error", ttfb_ms=None, route=None)
    await s.log_request(row)
    await s.close()
    (got,) = db_rows(
        path,
        "SELECT request_id, ts, surface, requested_model, route, status, stream, attempts, latency_ms, "
        "ttfb_ms, tokens_in, tokens_out, error_class, outcome, extra FROM requests",
    )
    assert got[:14] == ("req-3", T0 + 3, "openai_chat", "auto", None, 429, 0, 1, 123, None, 30, 15,
                        "rate_limited", "error")  # fmt: skip
    assert isinstance(got[14], str) and '"nested":{"ok":true}' in got[14]


async def test_sqlite_prunes_on_open(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, clock=fixed_clock(T0), retention_days=30)
    await s1.open()
    await s1.log_request(make_row(0, ts=T0 - 31 * DAY, request_id="old"))
    await s1.log_request(make_row(1, ts=T0 - 29 * DAY, request_id="kept"))
    await s1.record_usage(A, 1, T0 - 2 * DAY)
    await s1.record_usage(A, 1, T0 - 3600)
    await s1.add_event("x", A, T0 - 2 * DAY, 3 * DAY)
    await s1.set_cooldown(A, CooldownRecord(until=T0 - 1, source="heuristic"))
    await s1.close()
    s2 = SQLiteStore(path, clock=fixed_clock(T0), retention_days=30)
    await s2.open()
    await s2.close()
    assert db_rows(path, "SELECT request_id FROM requests") == [("kept",)]
    assert db_rows(path, "SELECT count(*) FROM usage") == [(1,)]
    assert db_rows(path, "SELECT count(*) FROM events") == [(0,)]
    assert db_rows(path, "SELECT count(*) FROM cooldowns") == [(0,)]


async def test_sqlite_failed_write_is_retried_in_order(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    await s.open()
    real_write = s._write_batch
    failures = [sqlite3.OperationalError("disk I/O error")]

    def flaky(batch: object) -> None:
        if failures:
            raise failures.pop()
        real_write(batch)  # type: ignore[arg-type]

    s._write_batch = flaky  # type: ignore[method-assign]
    await s.record_usage(A, 10, T0)
    await s.set_cooldown(A, CooldownRecord(until=T0 + 100, source="heuristic"))
    await s.log_request(make_row(1))
    with pytest.raises(sqlite3.OperationalError):
        await s.flush()
    await s.record_usage(A, 10, T0 + 1)
    await s.clear_cooldown(A)
    await s.log_request(make_row(2))
    await s.flush()
    await s.close()
    assert db_rows(path, "SELECT requests, tokens FROM usage") == [(2, 20)]
    assert db_rows(path, "SELECT count(*) FROM cooldowns") == [(0,)]  # the later clear won
    assert db_rows(path, "SELECT request_id FROM requests ORDER BY rowid") == [("req-1",), ("req-2",)]


async def test_sqlite_cancelled_flush_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    await s.open()
    for i in range(50):
        await s.log_request(make_row(i))
    task = asyncio.create_task(s.flush())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await s.log_request(make_row(50))
    await s.close()
    assert db_rows(path, "SELECT count(*), count(DISTINCT request_id) FROM requests") == [(51, 51)]


async def test_sqlite_recent_requests_beyond_ring(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), request_log_size=3)
    await s.open()
    rows = [make_row(i) for i in range(6)]
    for r in rows:
        await s.log_request(r)
    assert await s.recent_requests(3) == rows[:2:-1]  # from the ring
    assert await s.recent_requests(10) == rows[::-1]  # from the database
    await s.close()


async def test_sqlite_stores_independent(tmp_path: Path) -> None:
    s1 = SQLiteStore(tmp_path / "a" / "freellm.db", clock=fixed_clock(T0))
    s2 = SQLiteStore(tmp_path / "b" / "freellm.db", clock=fixed_clock(T0))
    await s1.open()
    await s2.open()
    await s1.set_setting("who", "one")
    await s1.record_usage(A, 5, T0)
    await s2.set_setting("who", "two")
    await s1.close()
    await s2.close()
    r1 = SQLiteStore(tmp_path / "a" / "freellm.db", clock=fixed_clock(T0))
    r2 = SQLiteStore(tmp_path / "b" / "freellm.db", clock=fixed_clock(T0))
    await r1.open()
    await r2.open()
    assert await r1.get_setting("who") == "one"
    assert await r2.get_setting("who") == "two"
    assert (await r1.usage(A, T0)).requests_day == 1
    assert (await r2.usage(A, T0)).requests_day == 0
    await r1.close()
    await r2.close()


async def test_sqlite_responses_persist_across_restart(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    await s1.open()
    big = {**response_doc("resp_big"), "input": [{"role": "user", "content": "x" * 100_000}]}
    await s1.put_response("resp_big", big, T0 + 100)
    await s1.put_response("resp_gone", response_doc("resp_gone"), T0 + 100)
    await s1.put_response("resp_old", response_doc("resp_old"), T0 + 10)
    assert db_rows(path, "SELECT count(*) FROM responses") == [(3,)]  # written through, not behind
    assert await s1.delete_response("resp_gone", T0) is True
    assert db_rows(path, "SELECT id FROM responses ORDER BY id") == [("resp_big",), ("resp_old",)]
    await s1.close()

    s2 = SQLiteStore(path, clock=fixed_clock(T0 + 50))  # resp_old expired meanwhile: pruned on open
    await s2.open()
    try:
        assert db_rows(path, "SELECT id FROM responses") == [("resp_big",)]
        assert await s2.get_response("resp_big", T0 + 50) == big  # read from disk
        assert await s2.get_response("resp_gone", T0 + 50) is None
        assert await s2.get_response("resp_old", T0 + 50) is None
        assert await s2.delete_response("resp_big", T0 + 50) is True
        assert await s2.get_response("resp_big", T0 + 50) is None  # the pending delete hides the row
    finally:
        await s2.close()
    assert db_rows(path, "SELECT count(*) FROM responses") == [(0,)]


async def test_sqlite_responses_cache_miss_reads_disk(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600, response_cache_size=2)
    await s.open()
    try:
        docs = {f"resp_{i}": response_doc(f"resp_{i}") for i in range(5)}
        for rid, doc in docs.items():
            await s.put_response(rid, doc, T0 + 100)
        assert len(s._responses) == 2  # resp_0..2 left the memory cache: read back from disk
        for rid, doc in docs.items():
            assert await s.get_response(rid, T0) == doc
        assert await s.delete_response("resp_0", T0) is True
        assert await s.get_response("resp_0", T0) is None
        assert await s.delete_response("resp_0", T0) is False
    finally:
        await s.close()


async def test_sqlite_responses_seen_by_another_store_on_the_same_file(tmp_path: Path) -> None:
    """Two worker processes share one database: a response one stores, the other can read at once."""
    path = tmp_path / "freellm.db"
    a = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    b = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    await a.open()
    await b.open()
    try:
        await a.put_response("resp_1", response_doc("resp_1"), T0 + 100)
        assert await b.get_response("resp_1", T0) == response_doc("resp_1")
        await a.put_response("resp_2", response_doc("resp_2"), T0 + 100)
        assert await b.delete_response("resp_2", T0) is True
        assert await a.get_response("resp_3", T0) is None
        assert db_rows(path, "SELECT id FROM responses") == [("resp_1",)]
    finally:
        await a.close()
        await b.close()


async def test_sqlite_response_read_racing_a_delete_is_not_stale(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600, response_cache_size=1)
    await s.open()
    try:
        await s.put_response("resp_a", response_doc("resp_a"), T0 + 100)
        await s.put_response("resp_b", response_doc("resp_b"), T0 + 100)  # evicts resp_a from memory
        await s.flush()
        read = asyncio.create_task(s.get_response("resp_a", T0))
        await asyncio.sleep(0)  # the read is on the database thread
        assert await s.delete_response("resp_a", T0) is True
        assert await read in (None, response_doc("resp_a"))  # either side of the delete is fine…
        assert await s.get_response("resp_a", T0) is None  # …but the row read must not come back cached
    finally:
        await s.close()


async def test_sqlite_migrates_a_version_1_database(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, clock=fixed_clock(T0))
    await s1.open()
    await s1.log_request(make_row(1))
    await s1.set_setting("k", "v")
    await s1.close()
    # Make it what version 1 wrote: no responses table, version 1.
    con = sqlite3.connect(path)
    con.execute("DROP TABLE responses")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    s2 = SQLiteStore(path, clock=fixed_clock(T0))
    await s2.open()
    try:
        assert db_rows(path, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert await s2.get_setting("k") == "v"
        assert [r.request_id for r in await s2.recent_requests(5)] == ["req-1"]
        await s2.put_response("resp_1", response_doc("resp_1"), T0 + 100)
        await s2.flush()
        assert db_rows(path, "SELECT id FROM responses") == [("resp_1",)]
    finally:
        await s2.close()
    assert db_rows(path, "SELECT count(*) FROM cache_entries") == [(0,)]
    assert SCHEMA_VERSION == 4


async def test_sqlite_cache_entries_survive_restart(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, clock=fixed_clock(T0), flush_interval_s=3600)
    await s1.open()
    await s1.put_cached("k1", {"body": "{\"id\":1}"}, T0 + 100)
    await s1.put_cached("k2", {"body": "{}"}, T0 + 100)
    await s1.delete_cached(["k2"])
    await s1.close()
    s2 = SQLiteStore(path, clock=fixed_clock(T0 + 1))
    await s2.open()
    try:
        assert await s2.load_cached(T0 + 1, 10) == [("k1", T0 + 100, {"body": "{\"id\":1}"})]
        assert await s2.load_cached(T0 + 101, 10) == []  # expired
        await s2.clear_cached()
        assert db_rows(path, "SELECT count(*) FROM cache_entries") == [(0,)]
    finally:
        await s2.close()


async def test_sqlite_newer_schema_refused(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s = SQLiteStore(path, clock=fixed_clock(T0))
    await s.open()
    await s.close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    s2 = SQLiteStore(path, clock=fixed_clock(T0))
    with pytest.raises(RuntimeError, match="newer"):
        await s2.open()
    await s2.close()


async def test_sqlite_close_without_open(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "never.db")
    await s.close()
    await s.close()
    assert not (tmp_path / "never.db").exists()


# -- factory --------------------------------------------------------------------------------------


def test_factory_default_is_sqlite(tmp_path: Path) -> None:
    for url in (None, "", "sqlite://"):
        s = create_store(tmp_path, url)
        assert isinstance(s, SQLiteStore)
        assert s.path == tmp_path / "freellm.db"
    s = create_store(tmp_path, f"sqlite://{tmp_path}/other.db")
    assert isinstance(s, SQLiteStore) and s.path == tmp_path / "other.db"


def test_factory_memory(tmp_path: Path) -> None:
    s = create_store(tmp_path, "memory://")
    assert isinstance(s, MemoryStore) and not isinstance(s, SQLiteStore)


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379/0", "rediss://cache:6380", "postgresql://u@db/freellm", "postgres://db"]
)
def test_factory_points_shared_stores_to_their_keys(tmp_path: Path, url: str) -> None:
    with pytest.raises(ValueError, match=r"storage\.redis_url or storage\.postgres_url"):
        create_store(tmp_path, url)


@pytest.mark.parametrize("url", ["mysql://db", "freellm.db"])
def test_factory_unknown(tmp_path: Path, url: str) -> None:
    with pytest.raises(ValueError):
        create_store(tmp_path, url)
