"""``GET /admin/runtime``: the process's own vital signs, for the soak (``python -m bench soak``) and for
an operator who suspects a leak.

Asyncio tasks, open file descriptors, resident memory, turns running, leases held and the upstream
pool's connections (checked out, idle). Everything is computed when asked and nothing is kept, so it
costs the request path nothing; one call walks the task set and ``/proc/self/fd`` once.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp
from aiohttp import web

from freellm.admin.changes import json_reply
from freellm.server.state import GATEWAY

__all__ = ["register", "runtime_json"]


def register(app: web.Application) -> None:
    app.router.add_get("/admin/runtime", get_runtime)


def _open_fds() -> int | None:
    """Open file descriptors of this process (None where there is no ``/proc``)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def _rss_bytes() -> int | None:
    """Resident memory now (not the peak ``getrusage`` reports), from ``/proc/self/statm``."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _pool(session: aiohttp.ClientSession) -> dict[str, int | None]:
    """The upstream pool's connections: checked out (a request is using it) and idle (kept alive).
    aiohttp has no public count, so its two containers are read; unknown (None) if they are renamed."""
    connector = session.connector
    acquired: Any = getattr(connector, "_acquired", None)
    idle: Any = getattr(connector, "_conns", None)
    return {
        "checked_out": len(acquired) if acquired is not None else None,
        "idle": sum(len(q) for q in idle.values()) if idle is not None else None,
    }


async def runtime_json(app: web.Application) -> dict[str, Any]:
    """The figures ``GET /admin/runtime`` answers with."""
    gw = app[GATEWAY]
    return {
        "pid": os.getpid(),
        "asyncio_tasks": len(asyncio.all_tasks()),
        "open_fds": _open_fds(),
        "rss_bytes": _rss_bytes(),
        "turns_running": len(gw.turns),
        "leases": await gw.store.lease_count(),
        "upstream_connections": _pool(gw.session),
    }


async def get_runtime(request: web.Request) -> web.Response:
    return json_reply(request, await runtime_json(request.app))
