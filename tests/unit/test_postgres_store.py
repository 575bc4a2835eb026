"""``PostgresStore`` against the real PostgreSQL of the development and CI machines (127.0.0.1:5432,
database ``test``, trust auth). Every test has its own schema ``t_<uuid hex>``, dropped afterwards.

Outages are made by :class:`TcpProxy`, a small forwarder the test controls: ``cut()`` closes every
connection and refuses new ones (PostgreSQL "down"), ``pause()`` keeps connections open but forwards
nothing (PostgreSQL "silent"), ``restore()`` brings it back on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from freellm.errors import RecordsStoreError, RecordsUnavailable
from freellm.store.base import RequestLogRow, StatusFilter, store_health
from freellm.store.composite import CompositeStore
from freellm.store.memory import MemoryStore
from freellm.store.postgres import SCHEMA_VERSION, PostgresStore, redact_url
from freellm.store.postgres_import import import_sqlite
from freellm.store.sqlite import SQLiteStore
from tests.unit.test_store_analytics import EXPECTED, FIVE_XX, T0, A, B, clock, fixture_rows, row

PG_HOST, PG_PORT = "127.0.0.1", 5432
PG_URL = f"postgresql://{PG_HOST}:{PG_PORT}/test"


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0) -> None:
    """Poll ``check`` until it holds (a deadline, not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.02)


class TcpProxy:
    """Forwards 127.0.0.1:<port> to PostgreSQL; cut, paused and restored by the test."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    @property
    def url(self) -> str:
        return f"postgresql://{PG_HOST}:{self.port}/test"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, PG_HOST, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(PG_HOST, PG_PORT)
        except OSError:
            writer.close()
            return
        self._conns |= {writer, up_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    await self._flowing.wait()
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._conns -= {writer, up_writer}

    async def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for w in list(self._conns):
            w.transport.abort()
        self._conns.clear()

    def pause(self) -> None:
        self._flowing.clear()

    async def restore(self) -> None:
        self._flowing.set()
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        self._flowing.set()
        await self.cut()


@pytest.fixture
async def namespace() -> AsyncIterator[str]:
    ns = f"t_{uuid.uuid4().hex}"
    yield ns
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{ns}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    p = TcpProxy()
    await p.start()
    yield p
    await p.close()


Factory = Callable[..., Awaitable[PostgresStore]]


@pytest.fixture
async def make_store(namespace: str) -> AsyncIterator[Factory]:
    """``await make_store(url=..., **kwargs)`` → an open store on the test's namespace, closed afterwards."""
    stores: list[PostgresStore] = []

    async def factory(url: str = PG_URL, *, open: bool = True, **kw: Any) -> PostgresStore:
        kw.setdefault("flush_interval_s", 0.05)
        kw.setdefault("retention_days", 30)
        kw.setdefault("clock", clock)  # retention at open() keeps the fixture rows of 2023
        s = PostgresStore(url, namespace=namespace, **kw)
        stores.append(s)
        if open:
            await s.open()
        return s

    yield factory
    for s in stores:
        await s.close()


async def pg_fetch(namespace: str, sql: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(PG_URL)
    try:
        return list(await conn.fetch(sql.replace("{s}", f'"{namespace}"'), *args))
    finally:
        await conn.close()


async def pg_count(namespace: str) -> int:
    return int((await pg_fetch(namespace, "SELECT COUNT(*) FROM {s}.requests"))[0][0])


# -- round trips ------------------------------------------------------------------------------------------


async def test_request_log_round_trip(make_store: Factory) -> None:
    s = await make_store(flush_interval_s=3600)
    rows = fixture_rows()
    for r in rows:
        await s.log_request(r)
    await s.flush()
    other = await make_store()  # another replica reads what this one wrote
    assert await other.recent_requests(100) == list(reversed(rows))
    assert await other.recent_requests(2) == [rows[-1], rows[-2]]
    assert await other.recent_requests(0) == []


async def test_settings_write_through_and_load(make_store: Factory) -> None:
    s = await make_store(flush_interval_s=3600)
    assert await s.get_setting("x") is None
    await s.set_setting("x", "1")
    await s.set_setting("admin_overlay", '{"chain": ["a/b"]}')
    assert await s.get_setting("x") == "1"
    other = await make_store()  # written through: another process reads it without any flush
    assert await other.get_setting("x") == "1"
    assert await other.get_setting("admin_overlay") == '{"chain": ["a/b"]}'


async def test_refresh_settings_between_two_instances(make_store: Factory) -> None:
    one, two = await make_store(), await make_store()
    await one.set_setting("provider_keys", "v1")
    assert await two.refresh_settings(["provider_keys", "admin_overlay"]) == {"provider_keys": "v1"}
    assert await two.get_setting("provider_keys") == "v1"
    assert await two.refresh_settings(["provider_keys"]) == {}  # nothing changed since
    await two.set_setting("provider_keys", "v2")
    assert await one.refresh_settings(["provider_keys"]) == {"provider_keys": "v2"}
    assert await two.refresh_settings(["provider_keys"]) == {}  # its own write is not a change
    assert await one.refresh_settings([]) == {}


async def test_responses_round_trip_across_instances_and_expiry(make_store: Factory) -> None:
    one, two = await make_store(), await make_store()
    now = time.time()
    doc = {"v": 1, "response": {"id": "resp_1", "output": []}, "input": [], "output": []}
    await one.put_response("resp_1", doc, now + 60)
    await one.put_response("resp_old", doc, now + 1)
    assert await two.get_response("resp_1", now) == doc  # written through before put returned
    assert await two.get_response("resp_old", now + 2) is None  # expired
    assert await two.get_response("nope", now) is None
    assert await one.delete_response("resp_1", now) is True
    assert await two.get_response("resp_1", now) is None
    assert await one.get_response("resp_1", now) is None
    assert await two.delete_response("resp_1", now) is False
    assert await two.delete_response("resp_old", now + 2) is False  # expired counts as gone


async def test_a_delete_on_another_replica_is_seen_even_after_a_read(make_store: Factory) -> None:
    one, two = await make_store(), await make_store()
    now = time.time()
    doc = {"response": {"id": "r"}, "input": [], "output": []}
    await one.put_response("r", doc, now + 60)
    assert await two.get_response("r", now) == doc  # now in two's memory too
    assert await one.delete_response("r", now)
    assert await two.get_response("r", now) is None  # PostgreSQL answers, not the stale copy


# -- the SQLite store's semantics -------------------------------------------------------------------------


async def both(tmp_path: Path, make_store: Factory, rows: list[RequestLogRow]) -> tuple[SQLiteStore, PostgresStore]:
    lite = SQLiteStore(tmp_path / "s.db", flush_interval_s=3600, clock=clock)
    await lite.open()
    pg = await make_store(flush_interval_s=3600, clock=clock)
    for r in rows:
        await lite.log_request(r)
        await pg.log_request(r)
    return lite, pg


async def test_analytics_and_queries_equal_the_sqlite_store(tmp_path: Path, make_store: Factory) -> None:
    rows = fixture_rows()
    lite, pg = await both(tmp_path, make_store, rows)
    try:
        assert await pg.request_analytics(T0, T0 + 100) == EXPECTED
        for since, now in ((T0, T0 + 100), (T0 + 3, T0 + 8), (T0 - 10, T0 + 200), (T0 + 500, T0 + 600)):
            assert await pg.request_analytics(since, now) == await lite.request_analytics(since, now)
        queries: list[dict[str, Any]] = [
            {},
            {"limit": 3},
            {"status": FIVE_XX},
            {"status": StatusFilter(((200, 200), (500, 599)))},
            {"route": A},
            {"route": A, "since": T0 + 2},
            {"route": "cache", "status": FIVE_XX},
            {"since": T0 + 50},
            {"route": f"fusion({A}+{B} -> {A})"},
        ]
        for q in queries:
            kw: dict[str, Any] = {"limit": 100, "status": None, "route": None, "since": None, **q}
            assert await pg.query_requests(**kw) == await lite.query_requests(**kw), q
    finally:
        await lite.close()


async def test_same_start_time_lists_newest_written_first(tmp_path: Path, make_store: Factory) -> None:
    rows = [row(i, T0 + (i % 3), A) for i in range(9)]
    lite, pg = await both(tmp_path, make_store, rows)
    try:
        kw: dict[str, Any] = {"limit": 100, "status": None, "route": None, "since": None}
        ids = [r.request_id for r in await pg.query_requests(**kw)]
        assert ids == [r.request_id for r in await lite.query_requests(**kw)]
        assert ids[:3] == ["req-8", "req-5", "req-2"]
    finally:
        await lite.close()


async def test_percentiles_match_sqlite_on_random_rows(tmp_path: Path, make_store: Factory) -> None:
    """percentile_disc against SQLite's integer nearest-rank arithmetic, for every count 1..60 on one
    route each, with ties, streams and oddly typed extras."""
    rnd = random.Random(14)
    rows: list[RequestLogRow] = []
    n = 0
    for count in range(1, 61):
        for _ in range(count):
            n += 1
            stream = rnd.random() < 0.5
            saved: Any = rnd.choice([5, 5.0, True, "7", None, 12])
            extra: dict[str, Any] = {"tokens_saved": saved} if saved is not None else {}
            if rnd.random() < 0.3:
                extra["failed"] = [*rnd.sample([f"r{k}/m" for k in range(1, 61)], 2), 3, None]
            rows.append(
                row(n, T0 + rnd.random() * 100, "cache" if count == 7 else f"r{count}/m",
                    latency_ms=rnd.randint(1, 40), stream=stream,
                    ttfb_ms=rnd.choice([None, rnd.randint(1, 9)]) if stream else None,
                    attempts=rnd.randint(1, 3), outcome=rnd.choice(["success", "success", "error"]),
                    tokens_in=rnd.randint(0, 99), tokens_out=rnd.randint(0, 99), extra=extra)
            )
    lite, pg = await both(tmp_path, make_store, rows)
    try:
        for since, now in ((T0, T0 + 100), (T0 + 20, T0 + 70)):
            assert await pg.request_analytics(since, now) == await lite.request_analytics(since, now)
    finally:
        await lite.close()


# -- write-behind and its bound ---------------------------------------------------------------------------


async def test_log_rows_are_written_behind(make_store: Factory, namespace: str) -> None:
    s = await make_store(flush_interval_s=0.05)
    await s.log_request(row(1, T0, A))
    assert s.pending_requests == 1  # queued, not written on the caller's time

    async def landed() -> bool:
        return await pg_count(namespace) == 1

    await eventually(landed)
    assert s.pending_requests == 0


async def test_bounded_buffer_drops_the_oldest_and_counts(
    make_store: Factory, proxy: TcpProxy, namespace: str
) -> None:
    s = await make_store(proxy.url, max_pending_requests=5, op_timeout_s=1.0)
    await proxy.cut()
    for i in range(8):
        await s.log_request(row(i, T0 + i, A))
    assert s.pending_requests == 5 and s.dropped_requests == 3

    async def buffering() -> bool:
        return s.health() == {"records": "buffering"}

    await eventually(buffering)
    for i in range(8, 10):  # rows keep coming while it is away: still bounded
        await s.log_request(row(i, T0 + i, A))
    assert s.pending_requests == 5 and s.dropped_requests == 5
    await proxy.restore()

    async def landed() -> bool:
        return await pg_count(namespace) == 5 and s.health() == {}

    await eventually(landed)
    ids = [r[0] for r in await pg_fetch(namespace, "SELECT request_id FROM {s}.requests ORDER BY seq")]
    assert ids == [f"req-{i}" for i in range(5, 10)]  # the newest rows, in order
    assert s.dropped_requests == 5


async def test_a_row_postgres_refuses_is_dropped_not_retried_forever(make_store: Factory, namespace: str) -> None:
    s = await make_store(flush_interval_s=3600)
    await s.log_request(row(1, T0, A))
    await s.log_request(row(2, T0, A, tokens_in=2**70))  # not a bigint: never writable
    await s.log_request(row(3, T0, A, request_id="a\x00b", extra={"text": "nul \x00 inside"}))
    await s.flush()
    assert s.rejected_requests == 1 and s.pending_requests == 0 and s.health() == {}
    ids = sorted(r[0] for r in await pg_fetch(namespace, "SELECT request_id FROM {s}.requests"))
    assert ids == ["a\ufffdb", "req-1"]


# -- migrations -------------------------------------------------------------------------------------------


async def test_concurrent_open_on_an_empty_namespace(make_store: Factory, namespace: str) -> None:
    stores = [await make_store(open=False) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    assert sorted(s.migrated_from or 0 for s in stores) == [0, SCHEMA_VERSION, SCHEMA_VERSION]
    assert {s.schema_version for s in stores} == {SCHEMA_VERSION}
    versions = await pg_fetch(namespace, "SELECT version FROM {s}.schema_migrations ORDER BY version")
    assert [v[0] for v in versions] == list(range(1, SCHEMA_VERSION + 1))
    await stores[0].set_setting("k", "v")
    assert await stores[2].refresh_settings(["k"]) == {"k": "v"}


async def test_a_newer_schema_is_refused(make_store: Factory, namespace: str) -> None:
    await make_store()
    await pg_fetch(namespace, "INSERT INTO {s}.schema_migrations (version) VALUES ($1)", SCHEMA_VERSION + 1)
    with pytest.raises(RecordsStoreError, match="newer than this freellm"):
        await make_store()


# -- start-up errors are configuration errors, named --------------------------------------------------------


async def test_a_refused_login_is_a_clear_error_without_the_password(namespace: str) -> None:
    s = PostgresStore(
        "postgresql://nosuchrole:hunter2secret@127.0.0.1:5432/test", namespace=namespace, retention_days=30
    )
    with pytest.raises(RecordsStoreError) as info:
        await s.open()
    message = str(info.value)
    assert "refused the login" in message and "nosuchrole" in message
    assert "hunter2secret" not in message and "***" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    await s.close()


async def test_an_unknown_database_is_a_clear_error(namespace: str) -> None:
    s = PostgresStore("postgresql://postgres:pw123456@127.0.0.1:5432/no_such_db_xyz", namespace=namespace, retention_days=30)
    with pytest.raises(RecordsStoreError) as info:
        await s.open()
    assert "unknown database" in str(info.value) and "no_such_db_xyz" in str(info.value)
    assert "pw123456" not in str(info.value)


async def test_an_unreachable_server_at_start_is_named(namespace: str, proxy: TcpProxy) -> None:
    await proxy.cut()
    s = PostgresStore(proxy.url, namespace=namespace, retention_days=30, connect_timeout_s=1.0)
    with pytest.raises(RecordsStoreError, match="cannot be reached"):
        await s.open()


def test_redact_url() -> None:
    assert redact_url("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://h/db") == "postgresql://h/db"


# -- faults -----------------------------------------------------------------------------------------------


async def test_outage_buffers_then_writes_everything(make_store: Factory, proxy: TcpProxy, namespace: str) -> None:
    s = await make_store(proxy.url, op_timeout_s=1.0)
    reader = await make_store()  # another replica, on a direct connection
    now = time.time()
    doc = {"response": {"id": "resp_held"}, "input": [], "output": []}
    await reader.put_response("resp_pg_only", doc, now + 600)
    await s.put_response("resp_held", doc, now + 600)
    assert store_health(CompositeStore(MemoryStore(), s)) == {}

    await proxy.cut()
    for i in range(20):  # keeps accepting: nothing waits for PostgreSQL
        await s.log_request(row(i, T0 + i, A))

    async def buffering() -> bool:
        return store_health(CompositeStore(MemoryStore(), s)) == {"records": "buffering"}

    await eventually(buffering)
    # Only PostgreSQL holds it: unknown is not absent.
    with pytest.raises(RecordsUnavailable) as info:
        await s.get_response("resp_pg_only", now)
    assert info.value.status == 503 and info.value.code == "records_unavailable"
    with pytest.raises(RecordsUnavailable):
        await s.delete_response("resp_pg_only", now)
    assert await s.get_response("resp_held", now) == doc  # this replica's own copy still serves
    # Written while away: kept and written later, never an error for the reply.
    await s.put_response("resp_during", doc, now + 600)
    await s.set_setting("admin_overlay", "during")
    assert await s.get_response("resp_during", now) == doc
    assert await s.refresh_settings(["admin_overlay"]) == {}
    with pytest.raises(RecordsUnavailable):
        await s.query_requests(limit=10, status=None, route=None, since=None)
    assert [r.request_id for r in await s.recent_requests(2)] == ["req-19", "req-18"]  # the ring

    await proxy.restore()

    async def recovered() -> bool:
        return s.health() == {} and await pg_count(namespace) == 20

    await eventually(recovered)
    assert s.dropped_requests == 0
    assert await reader.get_response("resp_during", now) == doc
    assert await reader.refresh_settings(["admin_overlay"]) == {"admin_overlay": "during"}
    assert await s.get_response("resp_pg_only", now) == doc


async def test_a_silent_server_times_out_and_recovers(make_store: Factory, proxy: TcpProxy, namespace: str) -> None:
    s = await make_store(proxy.url, op_timeout_s=0.3)
    proxy.pause()
    started = time.monotonic()
    await s.log_request(row(1, T0, A))
    await s.put_response("r", {"response": {}}, time.time() + 60)  # waits op_timeout_s at most
    assert time.monotonic() - started < 5

    async def buffering() -> bool:
        return s.health() == {"records": "buffering"}

    await eventually(buffering)
    with pytest.raises(RecordsUnavailable):
        await s.get_response("unknown", time.time())  # fails fast while buffering
    await proxy.cut()  # the stuck connections go; new ones work once restored
    await proxy.restore()

    async def recovered() -> bool:
        return s.health() == {} and await pg_count(namespace) == 1

    await eventually(recovered)
    assert len(await pg_fetch(namespace, "SELECT id FROM {s}.responses")) == 1


# -- indexes ----------------------------------------------------------------------------------------------


async def test_listing_and_analytics_use_the_indexes(make_store: Factory, namespace: str) -> None:
    """On 200k rows (ANALYZEd), the listings walk an index backwards and stop at the limit; the
    failure counts read the partial index. ``bench/analytics_cost.py --postgres`` times them on 1M."""
    s = await make_store()
    await pg_fetch(
        namespace,
        """INSERT INTO {s}.requests (request_id, ts, surface, requested_model, route, status, stream, attempts,
           latency_ms, ttfb_ms, tokens_in, tokens_out, error_class, outcome, extra)
           SELECT 'r' || i, 1700000000 + i * 10, 'chat', 'auto', 'p' || (i % 20) || '/m',
                  CASE WHEN i % 50 = 0 THEN 502 ELSE 200 END, i % 2 = 0, 1, i % 1000, NULL, 1, 1, NULL,
                  'success', CASE WHEN i % 100 = 0 THEN '{"failed": ["p1/m"]}'::jsonb ELSE '{}'::jsonb END
           FROM generate_series(1, 200000) AS i""",
    )
    await pg_fetch(namespace, "ANALYZE {s}.requests")

    async def plan(sql: str, params: list[Any]) -> str:
        rows = await pg_fetch(namespace, "EXPLAIN " + sql, *params)
        return "\n".join(r[0] for r in rows)

    sql, params = s._sql.query(limit=100, status=None, route=None, since=None)
    assert "Index Scan Backward using requests_ts" in await plan(sql, params)
    for status in (FIVE_XX, StatusFilter(((418, 418),))):  # rare statuses: requests_status or a short walk
        sql, params = s._sql.query(limit=100, status=status, route=None, since=None)
        listing = await plan(sql, params)
        assert "Seq Scan" not in listing and ("requests_ts" in listing or "requests_status" in listing)
    sql, params = s._sql.query(limit=100, status=None, route="p3/m", since=1700000000.0)
    assert "Index Scan Backward using requests_route" in await plan(sql, params)
    window = [1700000000.0 + 1_900_000, 1700000000.0 + 2_000_000]  # the newest 5 %
    assert "requests_failed" in await plan(s._sql.failures, window)
    assert "requests_ts" in await plan(s._sql.route_stats, window) or "requests_route" in await plan(
        s._sql.route_stats, window
    )


# -- import from a SQLite data directory -----------------------------------------------------------------


async def test_import_sqlite_moves_everything_once(tmp_path: Path, make_store: Factory) -> None:
    now = time.time()
    lite = SQLiteStore(tmp_path / "freellm.db")
    await lite.open()
    rows = [row(i, now - 100 + i, A, extra={"failed": [B]} if i % 2 else {}) for i in range(25)]
    for r in rows:
        await lite.log_request(r)
    doc = {"response": {"id": "resp_a"}, "input": [], "output": []}
    await lite.put_response("resp_a", doc, now + 600)
    await lite.put_response("resp_gone", doc, now - 1)
    await lite.set_setting("provider_keys", "v1:ciphertext")
    await lite.set_setting("admin_overlay", '{"x": 1}')
    await lite.close()

    pg = await make_store()
    await pg.set_setting("admin_overlay", "already-here")
    report = await import_sqlite(pg, tmp_path / "freellm.db", now=now)
    assert (report.requests, report.responses, report.settings) == (25, 1, 1)
    assert report.kept_settings == ("admin_overlay",)
    fresh = await make_store()
    assert await fresh.recent_requests(100) == list(reversed(rows))
    assert await fresh.get_response("resp_a", now) == doc
    assert await fresh.get_setting("provider_keys") == "v1:ciphertext"
    assert await fresh.get_setting("admin_overlay") == "already-here"
    with pytest.raises(RecordsStoreError, match="already imported"):
        await import_sqlite(pg, tmp_path / "freellm.db", now=now)
    assert len(await fresh.recent_requests(100)) == 25
