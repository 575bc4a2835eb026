"""Pick the :class:`StateStore` backend from a URL (rule 8: distributed by configuration).

* ``None``, ``""`` or ``sqlite://`` → :class:`SQLiteStore` on ``<data_dir>/freellm.db`` (the default);
* ``sqlite:///abs/file.db`` → :class:`SQLiteStore` on that file;
* ``memory://`` → :class:`MemoryStore`: nothing survives a restart (tests, throwaway runs);
* ``redis://`` / ``rediss://`` → shared hot state for several replicas — not yet (the scale-out issue);
* ``postgresql://`` / ``postgres://`` → durable records shared by replicas — not yet (same issue).

The store comes back unopened: the app's start-up awaits ``open()`` and its clean-up ``close()``.
"""

from __future__ import annotations

from pathlib import Path

from freellm.store.base import StateStore
from freellm.store.memory import MemoryStore
from freellm.store.shared import SharedSQLiteStore
from freellm.store.sqlite import SQLiteStore

__all__ = ["DB_FILENAME", "create_store"]

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
    if scheme in ("redis", "rediss", "redis+unix"):
        # Seam: a RedisStore implementing StateStore (hot state shared by replicas) plugs in here.
        raise NotImplementedError("the Redis state store comes with the scale-out issue")
    if scheme in ("postgresql", "postgres", "postgresql+asyncpg"):
        # Seam: a PostgreSQL store (durable records shared by replicas) plugs in here.
        raise NotImplementedError("the PostgreSQL state store comes with the scale-out issue")
    raise ValueError(f"unknown state store URL scheme {scheme!r} in {url!r}")
