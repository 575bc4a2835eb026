"""The reliability suite's fixtures: the baseline every profile's added latency is measured against."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import BackgroundLoop
from tests.reliability.profiles import profile
from tests.reliability.runner import Figures, bounded, run_profile


@pytest.fixture(scope="session")
def reliability_seconds() -> float:
    """Seconds of load per profile (bounded by default; ``FREELLM_RELIABILITY=full`` for the full form)."""
    return bounded()


@pytest.fixture(scope="session")
def baseline(
    servers_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory, reliability_seconds: float
) -> Figures:
    """The same load against the healthy route alone: the p99 each profile's added latency is over."""
    data_dir: Path = tmp_path_factory.mktemp("reliability-baseline")
    return run_profile(servers_loop, profile("baseline"), data_dir, reliability_seconds)
