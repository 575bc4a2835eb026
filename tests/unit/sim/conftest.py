"""Fixtures of the simulator's own tests: a private simulator per test (real HTTP on loopback), its
control client and an aiohttp session."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from freellm.sim import SimServer, start_sim
from freellm.sim.control import SimControl


@pytest.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = await start_sim()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def ctl(sim: SimServer) -> SimControl:
    return SimControl(sim.base_url)
