"""Fuzz fixtures: one long-lived gateway per module (see :mod:`tests.fuzz.support` for why), every
test here marked ``fuzz`` so ``-m fuzz`` / ``-m "not fuzz"`` select the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from freellm.sim import SimServer
from tests.fuzz.support import FuzzGateway, fuzz_gateway, seed_records
from tests.harness import BackgroundLoop, unique


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fuzz/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.fuzz)


@pytest.fixture(scope="module")
def fuzzed(servers_loop: BackgroundLoop, sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzGateway]:
    """The module's gateway, with its records seeded before the first example."""
    name = unique("m")
    for fg in fuzz_gateway(servers_loop, sim, tmp_path_factory.mktemp(name), name):
        seed_records(fg)
        yield fg
