"""freellm.server.limits_os: the open-file limit raised at start-up (soft → hard, never lowered)."""

from __future__ import annotations

import logging
import resource

import pytest

from freellm.server import limits_os
from freellm.server.limits_os import raise_nofile_limit


class FakeLimits:
    """Stands in for ``resource.getrlimit``/``setrlimit`` on RLIMIT_NOFILE."""

    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.soft, self.hard, self.refuse = soft, hard, refuse
        self.calls: list[tuple[int, int]] = []

    def get(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def set(self, which: int, limits: tuple[int, int]) -> None:
        self.calls.append(limits)
        if self.refuse:
            raise ValueError("not allowed to raise maximum limit")
        self.soft, self.hard = limits


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLimits:
    limits = FakeLimits(1024, 524288)
    monkeypatch.setattr(resource, "getrlimit", limits.get)
    monkeypatch.setattr(resource, "setrlimit", limits.set)
    return limits


def test_soft_raised_to_hard(fake: FakeLimits, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="freellm.server"):
        got = raise_nofile_limit()
    assert got.raised and got.before == 1024 and got.soft == 524288 and got.hard == 524288
    assert fake.calls == [(524288, 524288)]
    assert "raised from 1024 to 524288" in caplog.text
    assert got.max_streams == (524288 - limits_os.RESERVED_FDS) // 2


def test_never_lowered(fake: FakeLimits) -> None:
    fake.soft = fake.hard = 20000
    got = raise_nofile_limit()
    assert not got.raised and got.soft == 20000 and fake.calls == []
    assert raise_nofile_limit(4096).soft == 20000  # a smaller target does not lower it either


def test_target_capped_at_hard(fake: FakeLimits) -> None:
    got = raise_nofile_limit(10**9)
    assert got.soft == 524288 and fake.calls == [(524288, 524288)]


def test_infinite_hard_limit_capped(fake: FakeLimits) -> None:
    fake.hard = resource.RLIM_INFINITY
    got = raise_nofile_limit()
    assert got.raised and got.soft == 1 << 20 and fake.calls == [(1 << 20, resource.RLIM_INFINITY)]


def test_refusal_logged_with_the_limit(fake: FakeLimits, caplog: pytest.LogCaptureFixture) -> None:
    fake.refuse = True
    with caplog.at_level(logging.WARNING, logger="freellm.server"):
        got = raise_nofile_limit()
    assert not got.raised and got.soft == 1024 and got.problem and "not allowed" in got.problem
    assert "open-file limit stays at 1024" in caplog.text and "about 480 concurrent streams" in caplog.text


def test_real_process_limit_is_at_least_what_it_was() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    got = raise_nofile_limit()
    assert got.soft is not None and got.soft >= soft
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= soft
