"""Running the simulator: in-process for tests and the demo, or in the foreground for ``freellm sim``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from aiohttp import web

from freellm.sim.app import create_sim_app
from freellm.sim.keys import SIM_STATE
from freellm.sim.settings import SimSettings

__all__ = ["SimServer", "run_sim_forever", "start_sim"]

SHUTDOWN_TIMEOUT_S: Final = 2.0
LISTEN_BACKLOG: Final = 4096
"""The benchmark opens thousands of connections a second (``bench slow-streams``); aiohttp's default
backlog of 128 would drop some and leave them waiting for SYN retransmits."""
"""How long ``close`` lets an in-flight scripted response finish before cancelling it."""


@dataclass
class SimServer:
    """A listening simulator; ``provider_url`` gives the ``base_url`` a gateway config should use."""

    runner: web.AppRunner
    host: str
    port: int

    @property
    def app(self) -> web.Application:
        """The simulator app (its state is ``app[SIM_STATE]``)."""
        return self.runner.app

    @property
    def base_url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:9101`` (control API under ``/_sim/``)."""
        return f"http://{self.host}:{self.port}"

    def provider_url(self, name: str) -> str:
        """OpenAI-style base URL of virtual provider ``name``: ``http://host:port/name/v1``."""
        return f"{self.base_url}/{name}/v1"

    async def close(self) -> None:
        """Stop listening and end in-flight requests (stalled ones end at once)."""
        await self.runner.cleanup()

    async def __aenter__(self) -> SimServer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def start_sim(host: str = "127.0.0.1", port: int = 0, settings: SimSettings | None = None) -> SimServer:
    """Start a simulator on ``host:port`` (0 = a free port) in the running loop.

    Handler cancellation is on so a client that goes away during a stall or delay is noticed at once.
    """
    runner = web.AppRunner(
        create_sim_app(settings),
        handler_cancellation=True,
        access_log=None,
        shutdown_timeout=SHUTDOWN_TIMEOUT_S,
    )
    await runner.setup()
    runner.app[SIM_STATE].transport = runner.server  # for GET /_sim/connections
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = port
    for addr in runner.addresses:
        if isinstance(addr, tuple):
            bound_port = int(addr[1])
            break
    url_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return SimServer(runner=runner, host=url_host, port=bound_port)


async def run_sim_forever(host: str, port: int, settings: SimSettings | None) -> None:
    """Serve until cancelled (Ctrl-C in ``freellm sim``), closing cleanly on the way out.

    A coroutine so the caller chooses the event loop (the CLI runs it on uvloop).
    """
    server = await start_sim(host, port, settings)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()
