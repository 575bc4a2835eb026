"""``freellm db upgrade|import``: the PostgreSQL records store of a fleet (docs/deployment.md).

* ``db upgrade --config PATH`` creates or migrates the schema ``storage.namespace`` and prints its
  version — what every gateway also does at start, run on its own (before a rolling upgrade, or by an
  operator who keeps DDL out of the gateways' hands).
* ``db import --from DATA_DIR --config PATH`` moves a single gateway's SQLite data directory in: the
  request log, the unexpired stored responses and the settings (the encrypted provider keys and the admin
  overlay byte for byte). One transaction; a second import of the same directory is refused.

Also :func:`check_shared_stores`, which ``freellm serve`` calls first, so a refused login or an unknown
database is a one-line start-up error rather than a traceback from inside the server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from freellm.config import ConfigError, Settings, StorageConfig, load_settings
from freellm.errors import RecordsStoreError

__all__ = ["add_db_parser", "check_shared_stores"]


def add_db_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = sub.add_parser("db", help="the PostgreSQL records store (storage.postgres_url): migrate, import")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="<subcommand>")

    upgrade = db_sub.add_parser(
        "upgrade",
        help="create or migrate the schema storage.namespace and print its version",
        description="Create or migrate the PostgreSQL schema named by storage.namespace (gateways also do "
        "this at start; several at once are serialised by an advisory lock) and print its version.",
    )
    upgrade.add_argument("--config", required=True, help="YAML config file with storage.postgres_url")
    upgrade.set_defaults(func=cmd_db_upgrade)

    imp = db_sub.add_parser(
        "import",
        help="move a SQLite data directory's request log, stored responses and settings into PostgreSQL",
        description="Copy DATA_DIR/freellm.db's request log, unexpired stored responses and settings (the "
        "encrypted provider keys and the admin overlay as they are) into storage.postgres_url, in one "
        "transaction. A directory already imported into this namespace is refused. Settings PostgreSQL "
        "already has are kept unless --replace-settings. The provider keys stay encrypted: give every "
        "replica the master key of DATA_DIR (its master.key, or FREELLM_MASTER_KEY).",
    )
    imp.add_argument("--from", dest="source", required=True, metavar="DATA_DIR", help="the SQLite data directory")
    imp.add_argument("--config", required=True, help="YAML config file with storage.postgres_url")
    imp.add_argument(
        "--replace-settings", action="store_true", help="overwrite settings PostgreSQL already has"
    )
    imp.set_defaults(func=cmd_db_import)


def _storage(config: str) -> StorageConfig:
    settings: Settings = load_settings(config)
    if settings.storage.postgres_url is None:
        raise ConfigError(f"config {config}: storage.postgres_url is not set")
    return settings.storage


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from freellm.store.postgres import PostgresStore, redact_url

    storage = _storage(args.config)
    assert storage.postgres_url is not None

    async def run() -> tuple[int, int]:
        store = PostgresStore(
            storage.postgres_url or "", namespace=storage.namespace, retention_days=storage.request_log_retention_days
        )
        try:
            await store.open()
            return store.migrated_from or 0, store.schema_version or 0
        finally:
            await store.close()

    try:
        before, after = asyncio.run(run())
    except RecordsStoreError as exc:
        raise ConfigError(str(exc)) from None
    where = f'schema "{storage.namespace}" at {redact_url(storage.postgres_url)}'
    if before == after:
        print(f"{where}: version {after} (up to date)")
    else:
        print(f"{where}: version {after} (was {before or 'empty'})")
    return 0


def cmd_db_import(args: argparse.Namespace) -> int:
    from freellm.store.factory import DB_FILENAME
    from freellm.store.postgres import PostgresStore
    from freellm.store.postgres_import import ImportReport, import_sqlite

    storage = _storage(args.config)
    db_path = Path(args.source) / DB_FILENAME
    if not db_path.is_file():
        raise ConfigError(f"{args.source} has no {DB_FILENAME}: not a freellm data directory")

    async def run() -> ImportReport:
        store = PostgresStore(
            storage.postgres_url or "", namespace=storage.namespace, retention_days=storage.request_log_retention_days
        )
        try:
            await store.open()
            return await import_sqlite(store, db_path, replace_settings=args.replace_settings)
        finally:
            await store.close()

    try:
        report = asyncio.run(run())
    except RecordsStoreError as exc:
        print(f"freellm: {exc}", file=sys.stderr)
        return 1
    print(
        f'imported {report.source} into schema "{storage.namespace}": {report.requests} request-log rows, '
        f"{report.responses} stored responses, {report.settings} settings"
    )
    if report.kept_settings:
        print(
            f"kept PostgreSQL's own value of: {', '.join(report.kept_settings)} (--replace-settings overwrites them)"
        )
    print(
        "provider keys stay encrypted under the master key of this data directory (master.key, or "
        "FREELLM_MASTER_KEY): every replica needs that same key"
    )
    return 0


def check_shared_stores(storage: StorageConfig) -> None:
    """Open (creating or migrating) and close the shared stores once, before serving: a refused login,
    an unknown database or an unreachable PostgreSQL, or a Redis that refuses this gateway (wrong
    password, unknown database number), is a :class:`ConfigError` naming the cause (never the password),
    not a traceback from inside the server. An unreachable Redis is not refused: the gateway then
    starts on local hot state and reconnects (docs/deployment.md). No-op without either URL."""
    if storage.postgres_url is None and storage.redis_url is None:
        return

    async def run() -> None:
        if storage.postgres_url is not None:
            from freellm.store.postgres import PostgresStore

            records = PostgresStore(
                storage.postgres_url, namespace=storage.namespace, retention_days=storage.request_log_retention_days
            )
            try:
                await records.open()
            finally:
                await records.close()
        if storage.redis_url is not None:
            from freellm.store.redis_store import RedisHotStore

            hot = RedisHotStore(storage.redis_url, namespace=storage.namespace, timeout_ms=storage.redis_timeout_ms)
            try:
                await hot.open()
            finally:
                await hot.close()

    from freellm.store.redis_store import RedisStartError

    try:
        asyncio.run(run())
    except (RecordsStoreError, RedisStartError) as exc:
        raise ConfigError(str(exc)) from None
