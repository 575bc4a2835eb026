"""Pick the :class:`StateStore` backend from a URL (rule 8: distributed by configuration).

* ``None``, ``""`` or ``sqlite://`` → :class:`SQLiteStore` on ``<data_dir>/freellm.db`` (the default);
* ``sqlite:///abs/file.db`` → :class:`SQLiteStore` on that file;
* ``memory://`` → :class:`MemoryStore`: nothing survives a restart (tests, throwaway runs);

Shared stores are not URLs here but their own keys, ``storage.redis_url`` (hot state) and
``storage.postgres_url`` (records), composed by :func:`store_from_settings`.

The store comes back unopened: the app's start-up awaits ``open()`` and its clean-up ``close()``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from freellm.config import StorageConfig
from freellm.store.base import StateStore
from freellm.store.composite import CompositeStore
from freellm.store.memory import MemoryStore
from freellm.store.shared import SharedSQLiteStore
from freellm.store.sqlite import SQLiteStore

__all__ = ["DB_FILENAME", "create_store", "store_from_settings"]

DB_FILENAME = "freellm.db"


def create_store(
    data_dir: Path,
    url: str | None = None,
    *,
    retention_days: int = 30,
    worker: tuple[int, str] | None = None,
) -> StateStore:
    """The store named by ``url`` (see the module table); ``retention_days`` bounds the request log.

    ``worker`` — (index, unique id) when this process is one of several ``serve --workers`` processes:
    the default SQLite store then shares rate windows, leases and cooldowns with the other workers.
    """
    if url is None or not url.strip():
        path = Path(data_dir) / DB_FILENAME
        if worker is not None:
            index, worker_id = worker
            return SharedSQLiteStore(
                path, worker_id=worker_id, load_history=index == 0, retention_days=retention_days
            )
        return SQLiteStore(path, retention_days=retention_days)
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ValueError(f"state store URL {url!r} has no scheme (expected sqlite://, memory://, …)")
    if scheme == "sqlite":
        # sqlite:// → the data dir; sqlite:///abs/path.db → that file (the usual three-slash form).
        path = Path(rest) if rest else Path(data_dir) / DB_FILENAME
        return SQLiteStore(path, retention_days=retention_days)
    if scheme == "memory":
        return MemoryStore()
    if scheme in ("redis", "rediss", "unix", "postgresql", "postgres"):
        raise ValueError(f"a {scheme}:// store is configured with storage.redis_url or storage.postgres_url")
    raise ValueError(f"unknown state store URL scheme {scheme!r} in {url!r}")


def store_from_settings(storage: StorageConfig, data_dir: Path, *, worker: tuple[int, str] | None = None) -> StateStore:
    """The store ``storage`` configures (docs/deployment.md), unopened.

    No shared URL: the embedded default, :func:`create_store`'s SQLite (shared by ``serve --workers``
    processes through the file). ``redis_url``: hot state in Redis, for every replica and worker
    at once. ``postgres_url``: durable records in PostgreSQL. The half that has no URL stays local: the
    records in the data directory's SQLite (which every process on this host reads), the hot state in
    this process's SQLite store — so either URL may be set alone.
    """
    retention = storage.request_log_retention_days
    if storage.redis_url is None and storage.postgres_url is None:
        return create_store(data_dir, retention_days=retention, worker=worker)
    records: StateStore
    hot: StateStore
    if storage.postgres_url is not None:
        postgres = importlib.import_module("freellm.store.postgres")  # asyncpg only when configured
        records = postgres.PostgresStore(storage.postgres_url, namespace=storage.namespace, retention_days=retention)
    if storage.redis_url is not None:
        redis = importlib.import_module("freellm.store.redis_store")  # redis only when configured
        hot = redis.RedisHotStore(storage.redis_url, namespace=storage.namespace, timeout_ms=storage.redis_timeout_ms)
        if storage.postgres_url is None:
            # The workers share hot state in Redis, so the local records need no worker sync.
            records = create_store(data_dir, retention_days=retention)
    else:
        hot = create_store(data_dir, retention_days=retention, worker=worker)
    return CompositeStore(hot, records)
