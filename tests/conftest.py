"""Shared fixtures: one simulator for the session, a fresh gateway per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from freellm.sim import SimServer, start_sim
from freellm.sim.control import SimControl
from tests.harness import BackgroundLoop, GatewayServer, gateway_settings, start_gateway


@pytest.fixture(scope="session")
def servers_loop() -> Iterator[BackgroundLoop]:
    bg = BackgroundLoop()
    yield bg
    bg.close()


@pytest.fixture(scope="session")
def sim(servers_loop: BackgroundLoop) -> Iterator[SimServer]:
    server = servers_loop.run(start_sim(port=0))
    yield server
    servers_loop.run(server.close())


@pytest.fixture(scope="session")
def sim_control(sim: SimServer) -> SimControl:
    return SimControl(sim.base_url)


@pytest.fixture
def make_gateway(
    servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path
) -> Iterator[Callable[..., GatewayServer]]:
    """``make_gateway({"alpha-x": ["model-x"]}, chain=[...], keys={...}, extra={...})`` → a running gateway."""
    started: list[GatewayServer] = []

    def factory(providers: dict[str, list[str]], **kwargs: Any) -> GatewayServer:
        data_dir = tmp_path / f"gw{len(started)}"
        gw = start_gateway(servers_loop, gateway_settings(data_dir, sim.base_url, providers, **kwargs))
        started.append(gw)
        return gw

    yield factory
    for gw in started:
        gw.close()
