"""resolve_mode: the operator's master switch, the X-FreeLLM-Compress header table, the auto-trigger."""

from __future__ import annotations

import pytest

from freellm.compression import ResolvedMode, resolve_mode
from freellm.config import CompressionConfig


def cfg(mode: str = "standard", **kw: int) -> CompressionConfig:
    return CompressionConfig.model_validate({"mode": mode, **kw})


@pytest.mark.parametrize("header", [None, "", "on", "off", "aggressive", "lossless", "junk"])
def test_master_off_never_looks(header: str | None) -> None:
    r = resolve_mode(cfg("off", auto_trigger_tokens=10), header, 10_000)
    assert r == ResolvedMode("off", None, active=False, looked=False)


@pytest.mark.parametrize("header", ["off", "no", "0", "false", "bypass", "skip", " OFF ", "Skip", "\tFalse\n"])
def test_header_off_words(header: str) -> None:
    r = resolve_mode(cfg("aggressive", auto_trigger_tokens=10), header, 10_000)
    assert (r.mode, r.active, r.looked) == ("off", False, True)
    assert r.header_off == "off; saved~=0"


@pytest.mark.parametrize("header", [None, "", "on", "yes", "1", "true", " ON ", "YES", "whatever", "max"])
def test_header_default_and_on_use_the_configured_mode(header: str | None) -> None:
    r = resolve_mode(cfg("standard", target_tokens=500), header, 10)
    assert r == ResolvedMode("standard", 500, active=True)


@pytest.mark.parametrize(
    ("configured", "header", "expected"),
    [
        ("aggressive", "lossless", "lossless"),
        ("aggressive", "standard", "standard"),
        ("aggressive", "aggressive", "aggressive"),
        ("standard", "lossless", "lossless"),
        ("standard", "aggressive", "standard"),
        ("lossless", "standard", "lossless"),
        ("lossless", " Aggressive ", "lossless"),
        ("standard", "STANDARD", "standard"),
    ],
)
def test_header_mode_never_stronger_than_configured(configured: str, header: str, expected: str) -> None:
    r = resolve_mode(cfg(configured), header, 10)
    assert (r.mode, r.active, r.looked, r.auto) == (expected, True, True, False)


def test_auto_trigger_default_target_is_90_percent_of_trigger() -> None:
    c = cfg("lossless", auto_trigger_tokens=1001)
    assert resolve_mode(c, None, 1000) == ResolvedMode("lossless", None, active=True)
    r = resolve_mode(c, None, 1001)
    assert r == ResolvedMode("aggressive", 900, active=True, auto=True)
    assert resolve_mode(c, "on", 5000).mode == "aggressive"


def test_auto_trigger_uses_target_tokens_when_set() -> None:
    r = resolve_mode(cfg("standard", auto_trigger_tokens=1000, target_tokens=300), "yes", 2000)
    assert (r.mode, r.target_tokens, r.auto) == ("aggressive", 300, True)


def test_auto_trigger_not_with_an_explicit_mode_or_off_header() -> None:
    c = cfg("standard", auto_trigger_tokens=1000)
    assert resolve_mode(c, "standard", 99_999).mode == "standard"
    assert resolve_mode(c, "lossless", 99_999).mode == "lossless"
    assert resolve_mode(c, "off", 99_999).active is False
