"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from freellm.sim import SimServer, start_sim
from freellm.sim.control import SimControl


@pytest.fixture
async def sim_and_session() -> AsyncIterator[tuple[SimServer, SimControl, aiohttp.ClientSession]]:
    """A private simulator (its control client) and an aiohttp session, both closed afterwards."""
    sim = await start_sim()
    session = aiohttp.ClientSession()
    try:
        yield sim, SimControl(sim.base_url), session
    finally:
        await session.close()
        await sim.close()
