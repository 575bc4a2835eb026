"""``create_app(settings)``: the aiohttp application, its state, and its lifecycle."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import platformdirs
from aiohttp import web

from freellm.admin.live import LiveConfig, RuntimeKey, build_upstreams
from freellm.admin.watch import SettingsWatcher
from freellm.cache.store import ResponseCache
from freellm.config import ClientKeyConfig, Settings
from freellm.engine.fallback import FallbackLoop
from freellm.engine.pipeline.build import build_pipeline
from freellm.engine.turn import Engine
from freellm.net.ssrf import GuardedResolver, Reach
from freellm.routing.catalog import Catalog
from freellm.routing.probes import Prober
from freellm.routing.router import Router
from freellm.routing.sessions import SessionMemory
from freellm.secrets import KeyVault, load_master_key
from freellm.server import routes
from freellm.server.auth import ClientKeys
from freellm.server.auth_limit import AuthFailureLimiter
from freellm.server.middleware import IPRateLimiter, edge_middleware, guard_expect_continue
from freellm.server.protocol_log import ProtocolLogger
from freellm.server.state import GATEWAY, Gateway, build_compressor, compression_configured
from freellm.store.factory import store_from_settings

__all__ = ["create_app", "default_data_dir"]

log = logging.getLogger("freellm.server")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("freellm", appauthor=False))


def create_app(
    settings: Settings, *, client_keys: list[str] | None = None, worker_index: int | None = None
) -> web.Application:
    """Build the app. ``client_keys`` overrides ``settings.auth.api_keys`` (the CLI passes a generated key);
    ``worker_index`` is set when this process is one of several ``serve --workers`` processes."""
    body_limit = int(settings.server.body_limit_mb * 1024 * 1024)
    app = web.Application(
        middlewares=[edge_middleware],
        client_max_size=body_limit,
        # aiohttp logs a request it cannot parse with a traceback; this logger makes it one line
        # (freellm.server.protocol_log), so garbage from an unauthenticated client cannot flood the log.
        handler_args={"logger": ProtocolLogger()},
    )
    keys = (
        [ClientKeyConfig(key=k) for k in client_keys] if client_keys is not None else settings.auth.client_keys
    )

    base = settings

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        settings = base
        data_dir = settings.storage.path or default_data_dir()
        data_dir.mkdir(parents=True, exist_ok=True)
        worker = None if worker_index is None else (worker_index, f"{worker_index}-{os.getpid()}")
        metrics = None
        if settings.metrics.enabled:
            # Imported here, after a worker's fork: prometheus_client chooses its multi-process values on import.
            from freellm.metrics import create_metrics

            metrics = create_metrics(worker=worker_index is not None)
        store = store_from_settings(settings.storage, data_dir, worker=worker)
        await store.open()
        live = LiveConfig(base, store)
        await live.load()
        vault = KeyVault(store, load_master_key(os.environ, data_dir))
        live.runtime_keys = [RuntimeKey(k.id, k.provider, k.secret, k.enabled) for k in await vault.load()]
        settings = live.effective_or_base()
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True)
        session = aiohttp.ClientSession(connector=connector, auto_decompress=True, trust_env=False)
        runtime_session = None
        if not settings.security.allow_private_upstreams:
            guarded = aiohttp.TCPConnector(
                limit=0, ttl_dns_cache=300, enable_cleanup_closed=True, resolver=GuardedResolver(Reach.UPSTREAM)
            )
            runtime_session = aiohttp.ClientSession(connector=guarded, auto_decompress=True, trust_env=False)
        catalog = Catalog(settings)
        providers = build_upstreams(settings, live.overlay.provider_names(), session, runtime_session)
        router = Router(settings, catalog, providers, store)
        await router.restore(time.time())
        prober = Prober(settings.health, router, store)
        cache = ResponseCache(settings.cache, store)
        await cache.open()
        # Not configured: built on first use (Gateway.ensure_compressor), so freellm.compression is not imported.
        compression = settings.compression
        compressor = build_compressor(compression, data_dir) if compression_configured(compression, data_dir) else None
        sessions = SessionMemory(settings.sessions, store)
        pipeline = build_pipeline(settings, router, compressor=compressor, cache=cache, sessions=sessions)
        engine = Engine(settings, router, FallbackLoop(settings, router, store), pipeline)
        app[GATEWAY] = Gateway(
            settings=settings,
            data_dir=data_dir,
            store=store,
            session=session,
            catalog=catalog,
            router=router,
            engine=engine,
            client_keys=ClientKeys(keys),
            admin_keys=[k.encode() for k in settings.auth.admin_keys],
            cache=cache,
            compressor=compressor,
            ip_limiter=IPRateLimiter(settings.server.ip_rate_limit_rpm),
            auth_limiter=AuthFailureLimiter(settings.server.auth_failure_limit_per_min),
            body_limit=body_limit,
            runtime_session=runtime_session,
            prober=prober,
            live=live,
            vault=vault,
            metrics=metrics,
        )
        watcher = SettingsWatcher(app[GATEWAY])
        prober.start()
        watcher.start()
        try:
            yield
        finally:
            gw = app[GATEWAY]
            gw.shutting_down = True
            if gw.grace_timer is not None:
                gw.grace_timer.cancel()
            await watcher.stop()
            await prober.stop()
            await session.close()
            if runtime_session is not None:
                await runtime_session.close()
            await store.close()

    async def on_shutdown(app: web.Application) -> None:
        if GATEWAY in app:
            gw = app[GATEWAY]
            gw.shutting_down = True
            # aiohttp gives in-flight handlers the grace, then cancels them *and* closes their
            # connections in one step, so a stream cut there would just stop. At the grace, cancel the
            # turns ourselves while the connections are still open: each ends in-band (respond_turn).
            grace = settings.server.shutdown_grace_s
            gw.grace_timer = asyncio.get_running_loop().call_later(grace, gw.interrupt_turns)

    app.cleanup_ctx.append(lifecycle)
    app.on_shutdown.append(on_shutdown)
    routes.add_routes(app)
    guard_expect_continue(app)
    return app
