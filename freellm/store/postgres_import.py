"""``freellm db import``: a single gateway's SQLite data directory moved into a fleet's PostgreSQL records
(docs/deployment.md#schema-and-migrations) — its request log, unexpired stored responses and settings,
in one transaction, once per directory and namespace."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from freellm.errors import RecordsStoreError
from freellm.store.base import request_row
from freellm.store.postgres import _REQUEST_TABLE, PostgresStore, _Conn, _lock_key, _record, _text
from freellm.store.postgres_sql import REQUEST_COLUMNS

__all__ = ["ImportReport", "import_sqlite"]


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What ``freellm db import`` moved from a SQLite data directory into PostgreSQL."""

    source: str
    requests: int
    responses: int
    settings: int
    kept_settings: tuple[str, ...]
    """Settings PostgreSQL already had and that were left as they were (without ``replace_settings``)."""


_IMPORT_CHUNK: Final = 10_000


async def import_sqlite(
    store: PostgresStore, db_path: Path, *, replace_settings: bool = False, now: float | None = None
) -> ImportReport:
    """Copy a SQLite store's request log, unexpired stored responses and settings (the encrypted
    ``provider_keys`` and ``admin_overlay`` included, byte for byte) into ``store``'s schema, in one
    transaction. Refuses (:class:`RecordsStoreError`) a database already imported into this namespace,
    so running it twice never doubles the log. ``store`` must be open."""
    now = time.time() if now is None else now
    source = str(db_path.resolve())
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        async with store._conn(store._query_timeout_s) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(store.namespace) ^ 1)
            done = await conn.fetchrow(store._sql.find_import, source)
            if done is not None:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(done[0]))
                raise RecordsStoreError(
                    f"{source} was already imported into schema {store.namespace!r} on {when} "
                    f"({done[1]} request-log rows, {done[2]} responses, {done[3]} settings); nothing done"
                )
            requests = await _import_requests(store, conn, con)
            responses = 0
            for rid, expires_at, doc in con.execute(
                "SELECT id, expires_at, doc FROM responses WHERE expires_at > ?", (now,)
            ):
                await conn.execute(store._sql.upsert_response, rid, expires_at, _text(doc))
                responses += 1
            settings = 0
            kept: list[str] = []
            for name, value in con.execute("SELECT name, value FROM settings ORDER BY name"):
                if replace_settings:
                    await conn.execute(store._sql.upsert_setting, name, value, now)
                elif await conn.fetchval(store._sql.insert_setting_if_absent, name, value, now) is None:
                    kept.append(name)
                    continue
                settings += 1
            await conn.execute(store._sql.record_import, source, now, requests, responses, settings)
    finally:
        con.close()
    return ImportReport(source, requests, responses, settings, tuple(kept))


async def _import_requests(store: PostgresStore, conn: _Conn, con: sqlite3.Connection) -> int:
    cur = con.execute(
        "SELECT request_id, ts, surface, requested_model, route, status, stream, attempts, latency_ms, "
        "ttfb_ms, tokens_in, tokens_out, error_class, outcome, extra FROM requests ORDER BY rowid"
    )
    total = 0
    while chunk := cur.fetchmany(_IMPORT_CHUNK):
        records = [_record(request_row(t)) for t in chunk]
        await conn.copy_records_to_table(
            _REQUEST_TABLE, records=records, columns=REQUEST_COLUMNS, schema_name=store.namespace
        )
        total += len(records)
    return total
