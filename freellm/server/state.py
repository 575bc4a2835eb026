"""The gateway's application state: created at start-up, closed at clean-up, hung on the aiohttp app."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from freellm.cache.store import ResponseCache
from freellm.config import CompressionConfig, Settings
from freellm.engine.turn import Engine
from freellm.routing.catalog import Catalog
from freellm.routing.router import Router
from freellm.server.auth import Client, ClientKeys
from freellm.server.auth_limit import AuthFailureLimiter
from freellm.store.base import StateStore

if TYPE_CHECKING:
    from freellm.admin.live import LiveConfig
    from freellm.compression import Compressor
    from freellm.metrics import Metrics
    from freellm.routing.probes import Prober
    from freellm.secrets import KeyVault
    from freellm.server.middleware import IPRateLimiter

__all__ = ["BASE_HEADERS", "CLIENT", "GATEWAY", "REQUEST_ID", "Gateway", "build_compressor", "compression_configured"]


def compression_configured(config: CompressionConfig, data_dir: Path) -> bool:
    """Whether the operator asked for compression at all: a mode, engine settings, an explicit
    ``filters_dir``, or custom filter files in the default one (``<data dir>/filters``).

    Then the compressor is built at start-up (and on a reload), so a bad engine name or tunable is a
    start-up error and a broken filter file is logged at once, as always. Otherwise building it could
    neither fail nor warn, so it waits for its first use (:meth:`Gateway.ensure_compressor`) and
    ``freellm.compression`` — a sizeable share of the start-up imports — is never loaded by a gateway
    that does not compress."""
    if config.mode != "off" or config.engines or config.filters_dir is not None:
        return True
    default = data_dir / "filters"
    try:
        return default.is_dir() and any(default.glob("*.json"))
    except OSError:  # unreadable: building the compressor reports it as it always did
        return True


def build_compressor(config: CompressionConfig, data_dir: Path) -> Compressor:
    """The app's compressor for ``config`` (raises ConfigError for a bad engine name or tunable)."""
    from freellm.compression import Compressor

    return Compressor(config, filters_dir=config.filters_dir or data_dir / "filters")


@dataclass(slots=True)
class Gateway:
    settings: Settings
    data_dir: Path
    store: StateStore
    session: aiohttp.ClientSession
    catalog: Catalog
    router: Router
    engine: Engine
    client_keys: ClientKeys
    ip_limiter: IPRateLimiter
    cache: ResponseCache
    compressor: Compressor | None
    """Built at start-up when :func:`compression_configured`, else None until
    :meth:`ensure_compressor` builds it (the admin stats and preview)."""
    live: LiveConfig | None = None
    """The YAML base, the admin overlay and the run-time keys (the admin API changes these)."""
    vault: KeyVault | None = None
    """The encrypted key vault (:class:`freellm.secrets.KeyVault`), opened at start-up."""
    prober: Prober | None = None
    """The cooldown probe and key health pass (started with the app)."""
    metrics: Metrics | None = None
    """The Prometheus metrics behind ``GET /metrics`` (created with the app)."""
    auth_limiter: AuthFailureLimiter = field(default_factory=lambda: AuthFailureLimiter(0))
    """Failed authentications per client IP (``server.auth_failure_limit_per_min``; docs/security.md)."""
    body_limit: int = 25 * 1024 * 1024
    """``server.body_limit_mb`` in bytes: a declared ``Content-Length`` over it is a 413 before any read."""
    runtime_session: aiohttp.ClientSession | None = None
    """The HTTP pool of providers added at run time (admin API): its resolver refuses link-local and
    cloud-metadata addresses at every connection unless ``security.allow_private_upstreams``; None when
    that is on (they share :attr:`session`)."""
    admin_keys: list[bytes] = field(default_factory=list)
    """``auth.admin_keys``: the only keys the ``/admin/`` routes accept (none: every one is a 404)."""
    query_key_warned: bool = False
    """A client's ``?key=`` was warned about (once per app, not once per process: two apps, two warnings)."""
    shutting_down: bool = False
    turns: set[asyncio.Task[Any]] = field(default_factory=set)
    """Handler tasks running a turn, so a shutdown can end them when its grace runs out."""
    interrupted: set[asyncio.Task[Any]] = field(default_factory=set)
    """Turns cancelled by :meth:`interrupt_turns` that have not yet claimed it."""
    grace_timer: asyncio.TimerHandle | None = None

    def ensure_compressor(self) -> Compressor:
        """The compressor, built now if compression was not configured at start-up (or reload): the
        admin routes answer exactly as if it had been built then (a new one has zero counters)."""
        if self.compressor is None:
            self.compressor = build_compressor(self.settings.compression, self.data_dir)
        return self.compressor

    def interrupt_turns(self) -> None:
        """The shutdown grace ran out: cancel every turn still running (each then ends in-band)."""
        for task in self.turns:
            if not task.done():
                self.interrupted.add(task)
                task.cancel()

    def claim_interrupt(self, task: asyncio.Task[Any] | None) -> bool:
        """True when ``task``'s cancellation came from :meth:`interrupt_turns`; the task is then
        un-cancelled so its handler can still answer the client (a 503, or the end of its stream)."""
        if task is None or task not in self.interrupted:
            return False
        self.interrupted.discard(task)
        task.uncancel()
        return True


GATEWAY = web.AppKey("gateway", Gateway)

REQUEST_ID = web.RequestKey("request_id", str)
"""The request id (echoed ``X-Request-ID`` or generated), set by the edge middleware."""
CLIENT = web.RequestKey("client", Client)
"""Which client key authenticated the request (absent on public and admin paths)."""
BASE_HEADERS = web.RequestKey("base_headers", dict[str, str])
"""Headers every response on this request carries (request id, rate-limit window), set at the edge."""
