"""Test harness: real servers on loopback, run on a background event loop thread.

Tests drive them with the official (synchronous) SDKs and plain HTTP, exactly as users do. Each test
gets its own gateway (own data dir, own state) and its own simulator provider names, so tests never
share cooldowns or scripts.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from freellm.config import Settings
from freellm.server.app import create_app
from freellm.server.state import GATEWAY, Gateway

T = TypeVar("T")

CLIENT_KEY = "sk-test-client"


class BackgroundLoop:
    """An asyncio loop in a daemon thread; ``run`` executes a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="servers", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


@dataclass
class GatewayServer:
    runner: web.AppRunner
    port: int
    bg: BackgroundLoop
    closed: bool = field(default=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def state(self) -> Gateway:
        return self.runner.app[GATEWAY]

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the servers' loop (e.g. to inspect the store)."""
        return self.bg.run(coro)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.bg.run(self.runner.cleanup())


async def _start_gateway(settings: Settings) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(create_app(settings), handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    return runner, port


def start_gateway(bg: BackgroundLoop, settings: Settings) -> GatewayServer:
    runner, port = bg.run(_start_gateway(settings))
    return GatewayServer(runner=runner, port=port, bg=bg)


def free_port() -> int:
    """A TCP port free on loopback right now (for a server a test starts as a subprocess)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def gateway_settings(
    data_dir: Path,
    sim_url: str,
    providers: dict[str, list[str]],
    *,
    chain: list[str] | None = None,
    keys: dict[str, list[str]] | None = None,
    extra: dict[str, Any] | None = None,
    model_options: dict[str, dict[str, Any]] | None = None,
) -> Settings:
    """Settings for providers on the simulator: ``{"alpha-1234": ["model-x"], ...}``."""
    keys = keys or {}
    model_options = model_options or {}
    doc: dict[str, Any] = {
        "auth": {"api_keys": [CLIENT_KEY]},
        "storage": {"path": str(data_dir)},
        "server": {"ip_rate_limit_rpm": 0, "auth_failure_limit_per_min": 0},  # tests of the limiters turn them on
        "providers": [
            {
                "name": name,
                "kind": "openai",
                "base_url": f"{sim_url}/{name}/v1",
                "keys": keys.get(name, [f"{name}-key-1"]),
                "models": [{"id": m, **model_options.get(f"{name}/{m}", {})} for m in models],
            }
            for name, models in providers.items()
        ],
        "chain": chain or [f"{name}/{m}" for name, models in providers.items() for m in models],
    }
    for section, values in (extra or {}).items():
        doc.setdefault(section, {}).update(values)
    return Settings.model_validate(doc)
