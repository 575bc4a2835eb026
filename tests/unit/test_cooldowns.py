"""Cooldown duration policy: every row of spec §3 "Cooldown", the ladder, caps and the model bench."""

from __future__ import annotations

import calendar
from dataclasses import replace
from typing import Any

import pytest

from freellm.config import FallbackConfig
from freellm.engine.failure import CooldownKind, Failure, FailureKind, classify
from freellm.errors import UpstreamError
from freellm.routing.cooldowns import (
    CooldownDecision,
    bench_decision,
    decide_cooldown,
    is_local_base_url,
    next_utc_midnight,
)

CFG = FallbackConfig()
# 2024-03-10 12:00:00 UTC
NOON = float(calendar.timegm((2024, 3, 10, 12, 0, 0)))
MIDNIGHT = float(calendar.timegm((2024, 3, 11, 0, 0, 0)))


def E(message: str, **kw: Any) -> UpstreamError:
    return UpstreamError(message, **kw)


def decide(
    failure: Failure,
    *,
    now: float = NOON,
    is_local: bool = False,
    cfg: FallbackConfig = CFG,
    daily_exhausted: bool = False,
    limits_unknown: bool = False,
    ladder_hits_24h: int = 0,
    rate_limit_hits_1h: int = 0,
) -> CooldownDecision | None:
    return decide_cooldown(
        failure,
        now=now,
        is_local=is_local,
        cfg=cfg,
        daily_exhausted=daily_exhausted,
        limits_unknown=limits_unknown,
        ladder_hits_24h=ladder_hits_24h,
        rate_limit_hits_1h=rate_limit_hits_1h,
    )


RATE_429 = classify(E("API error 429: Too Many Requests", status=429))
RATE_429_HINT = classify(E("API error 429: Too Many Requests", status=429, retry_after_s=300.0))
TIMEOUT = classify(E("no first byte", timeout=True))
SERVER_503 = classify(E("API error 503: Service Unavailable", status=503))
AUTH = classify(E("API error 401: bad key", status=401))
CREDIT = classify(E("API error 402: Payment required", status=402))
TIER = classify(E("API error 403: Forbidden", status=403))
DAILY = classify(E("API error 429: daily quota exhausted", status=429))
DAILY_HINT = classify(E("API error 429: daily quota exhausted", status=429, retry_after_s=432.0))
NOT_FOUND = classify(E("API error 404: nope", status=404))
TOO_LARGE = classify(E("API error 413: too large", status=413))
EMPTY_LENGTH = classify(E("empty completion", skip_bench=True))
FORMAT = classify(E("ignored response_format", skip_model=True, skip_bench=True))
FATAL = classify(E("unsupported parameter", status=400))
EMPTY = classify(E("empty completion"))


def test_fixtures_classified_as_expected() -> None:
    assert RATE_429.rate_limit_signal and RATE_429.cooldown is CooldownKind.TRANSIENT
    assert AUTH.cooldown is CooldownKind.AUTH
    assert CREDIT.cooldown is CooldownKind.CREDIT
    assert TIER.cooldown is CooldownKind.TIER
    assert DAILY.cooldown is CooldownKind.DAILY
    assert TOO_LARGE.cooldown is CooldownKind.NONE
    assert FATAL.kind is FailureKind.FATAL


# ── The table, row by row ────────────────────────────────────────────────────────────────────────

TABLE: list[tuple[str, Failure, dict[str, Any], tuple[float, str] | None]] = [
    ("auth 5 min", AUTH, {}, (300.0, "auth")),
    ("auth on a local key still 5 min", AUTH, {"is_local": True}, (300.0, "auth")),
    ("402 credit 24h", CREDIT, {}, (86400.0, "credit")),
    ("402 on local key still 24h", CREDIT, {"is_local": True}, (86400.0, "credit")),
    ("403 tier 24h", TIER, {}, (86400.0, "tier")),
    ("403 on local key still 24h", TIER, {"is_local": True}, (86400.0, "tier")),
    ("daily until UTC midnight", DAILY, {}, (MIDNIGHT - NOON, "authoritative")),
    ("daily with Retry-After", DAILY_HINT, {}, (432.0, "authoritative")),
    ("daily near midnight floors at 60s", DAILY, {"now": MIDNIGHT - 5}, (60.0, "authoritative")),
    ("daily at exact midnight waits a full day", DAILY, {"now": MIDNIGHT}, (86400.0, "authoritative")),
    (
        "daily on local key still midnight (row order)",
        DAILY,
        {"is_local": True},
        (MIDNIGHT - NOON, "authoritative"),
    ),
    ("local 5s", RATE_429, {"is_local": True}, (5.0, "heuristic")),
    ("local ignores Retry-After", RATE_429_HINT, {"is_local": True}, (5.0, "heuristic")),
    (
        "local never escalates",
        RATE_429,
        {"is_local": True, "daily_exhausted": True, "ladder_hits_24h": 3},
        (5.0, "heuristic"),
    ),
    ("local timeout 5s", TIMEOUT, {"is_local": True}, (5.0, "heuristic")),
    ("default 90s for 429", RATE_429, {}, (90.0, "heuristic")),
    ("default 90s for timeout", TIMEOUT, {}, (90.0, "heuristic")),
    ("default 90s for 5xx", SERVER_503, {}, (90.0, "heuristic")),
    ("default 90s for 404", NOT_FOUND, {}, (90.0, "heuristic")),
    ("default 90s for empty completion", EMPTY, {}, (90.0, "heuristic")),
    ("Retry-After longer wins", RATE_429_HINT, {}, (300.0, "authoritative")),
    ("no cooldown: fatal", FATAL, {}, None),
    ("no cooldown: skipBench empty length", EMPTY_LENGTH, {}, None),
    ("no cooldown: format ignored", FORMAT, {}, None),
    ("no cooldown: context too large", TOO_LARGE, {}, None),
]


@pytest.mark.parametrize(("name", "failure", "kw", "expected"), TABLE, ids=[t[0] for t in TABLE])
def test_cooldown_table(
    name: str, failure: Failure, kw: dict[str, Any], expected: tuple[float, str] | None
) -> None:
    got = decide(failure, **kw)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got.seconds == pytest.approx(expected[0])
        assert got.source == expected[1]


def test_empty_length_after_streak_gets_normal_cooldown() -> None:
    # The caller lifts the exemption at the streak limit by clearing skip_bench.
    lifted = replace(EMPTY_LENGTH, skip_bench=False)
    got = decide(lifted)
    assert got == CooldownDecision(90.0, "heuristic")


# ── The ladder ───────────────────────────────────────────────────────────────────────────────────

LADDER: list[tuple[str, dict[str, Any], float, bool]] = [
    # measured daily exhaustion: full ladder, one step per prior hit in 24h
    ("daily step 0", {"daily_exhausted": True, "ladder_hits_24h": 0}, 120.0, True),
    ("daily step 1", {"daily_exhausted": True, "ladder_hits_24h": 1}, 600.0, True),
    ("daily step 2", {"daily_exhausted": True, "ladder_hits_24h": 2}, 3600.0, True),
    ("daily step 3", {"daily_exhausted": True, "ladder_hits_24h": 3}, 86400.0, True),
    ("daily step beyond", {"daily_exhausted": True, "ladder_hits_24h": 9}, 86400.0, True),
    # unknown limits: needs ≥2 real rate-limit hits in the hour, capped at 10 min
    ("null limits one hit", {"limits_unknown": True, "rate_limit_hits_1h": 1}, 90.0, False),
    ("null limits two hits step 0", {"limits_unknown": True, "rate_limit_hits_1h": 2}, 120.0, True),
    (
        "null limits step 1",
        {"limits_unknown": True, "rate_limit_hits_1h": 3, "ladder_hits_24h": 1},
        600.0,
        True,
    ),
    (
        "null limits capped at 10m",
        {"limits_unknown": True, "rate_limit_hits_1h": 5, "ladder_hits_24h": 2},
        600.0,
        True,
    ),
    (
        "null limits capped at 10m beyond",
        {"limits_unknown": True, "rate_limit_hits_1h": 5, "ladder_hits_24h": 7},
        600.0,
        True,
    ),
    # known limits, not exhausted: never escalates on hits alone
    (
        "known limits hits ignored",
        {"limits_unknown": False, "rate_limit_hits_1h": 10, "ladder_hits_24h": 2},
        90.0,
        False,
    ),
]


@pytest.mark.parametrize(("name", "kw", "seconds", "escalated"), LADDER, ids=[t[0] for t in LADDER])
def test_ladder(name: str, kw: dict[str, Any], seconds: float, escalated: bool) -> None:
    got = decide(RATE_429, **kw)
    assert got is not None
    assert got.seconds == seconds
    assert got.source == "heuristic"
    assert got.escalated is escalated


@pytest.mark.parametrize("failure", [TIMEOUT, SERVER_503], ids=["timeout", "5xx"])
def test_timeouts_and_5xx_never_escalate(failure: Failure) -> None:
    cases: list[dict[str, Any]] = [
        {"daily_exhausted": True, "ladder_hits_24h": 3},
        {"limits_unknown": True, "rate_limit_hits_1h": 9, "ladder_hits_24h": 3},
    ]
    for kw in cases:
        got = decide(failure, **kw)
        assert got == CooldownDecision(90.0, "heuristic", False)


def test_null_limit_ladder_needs_a_rate_limit_signal() -> None:
    # two earlier 429s in the hour, but this failure is a 404: no quota evidence
    got = decide(NOT_FOUND, limits_unknown=True, rate_limit_hits_1h=2)
    assert got == CooldownDecision(90.0, "heuristic", False)


def test_measured_daily_exhaustion_escalates_other_failures() -> None:
    got = decide(NOT_FOUND, daily_exhausted=True, ladder_hits_24h=1)
    assert got == CooldownDecision(600.0, "heuristic", True)


# ── Retry-After as a floor ───────────────────────────────────────────────────────────────────────

FLOOR: list[tuple[str, float, dict[str, Any], tuple[float, str]]] = [
    ("shorter hint loses to 90s", 30.0, {}, (90.0, "heuristic")),
    ("equal hint stays heuristic", 90.0, {}, (90.0, "heuristic")),
    ("longer hint wins", 300.0, {}, (300.0, "authoritative")),
    (
        "hint shorter than ladder loses",
        300.0,
        {"daily_exhausted": True, "ladder_hits_24h": 2},
        (3600.0, "heuristic"),
    ),
    (
        "hint longer than ladder wins",
        7200.0,
        {"daily_exhausted": True, "ladder_hits_24h": 2},
        (7200.0, "authoritative"),
    ),
    (
        "hint beats null-limit cap",
        1800.0,
        {"limits_unknown": True, "rate_limit_hits_1h": 3, "ladder_hits_24h": 3},
        (1800.0, "authoritative"),
    ),
    ("hint capped at 24h", 86400.0, {}, (86400.0, "authoritative")),
]


@pytest.mark.parametrize(("name", "hint", "kw", "expected"), FLOOR, ids=[t[0] for t in FLOOR])
def test_retry_after_floor(name: str, hint: float, kw: dict[str, Any], expected: tuple[float, str]) -> None:
    failure = replace(RATE_429, retry_after_s=hint)
    got = decide(failure, **kw)
    assert got is not None
    assert (got.seconds, got.source) == expected


def test_retry_after_capped_by_cooldown_max() -> None:
    failure = replace(RATE_429, retry_after_s=10 * 86400.0)
    got = decide(failure)
    assert got == CooldownDecision(86400.0, "authoritative")


def test_settings_drive_every_duration() -> None:
    cfg = FallbackConfig(
        cooldown_default_s=30.0,
        cooldown_local_s=1.0,
        cooldown_auth_s=60.0,
        cooldown_credit_s=3600.0,
        cooldown_tier_s=7200.0,
        cooldown_ladder_s=[10.0, 20.0],
        cooldown_null_limit_cap_s=15.0,
        cooldown_max_s=5000.0,
    )
    assert decide(RATE_429, cfg=cfg) == CooldownDecision(30.0, "heuristic")
    assert decide(RATE_429, cfg=cfg, is_local=True) == CooldownDecision(1.0, "heuristic")
    assert decide(AUTH, cfg=cfg) == CooldownDecision(60.0, "auth")
    assert decide(CREDIT, cfg=cfg) == CooldownDecision(3600.0, "credit")
    assert decide(TIER, cfg=cfg) == CooldownDecision(5000.0, "tier")  # capped by cooldown_max_s
    assert decide(RATE_429, cfg=cfg, daily_exhausted=True, ladder_hits_24h=5) == CooldownDecision(
        20.0, "heuristic", True
    )
    assert decide(RATE_429, cfg=cfg, limits_unknown=True, rate_limit_hits_1h=2, ladder_hits_24h=1) == (
        CooldownDecision(15.0, "heuristic", True)
    )
    assert decide(DAILY_HINT, cfg=cfg) == CooldownDecision(432.0, "authoritative")
    assert decide(DAILY, cfg=cfg).seconds == 5000.0  # type: ignore[union-attr]


# ── UTC midnight ─────────────────────────────────────────────────────────────────────────────────

MIDNIGHTS = [
    (NOON, MIDNIGHT),
    (MIDNIGHT, MIDNIGHT + 86400),
    (MIDNIGHT - 0.001, MIDNIGHT),
    (0.0, 86400.0),
    (float(calendar.timegm((2024, 2, 28, 23, 59, 59))), float(calendar.timegm((2024, 2, 29, 0, 0, 0)))),
    (float(calendar.timegm((2024, 12, 31, 13, 0, 0))), float(calendar.timegm((2025, 1, 1, 0, 0, 0)))),
]


@pytest.mark.parametrize(("now", "expected"), MIDNIGHTS)
def test_next_utc_midnight(now: float, expected: float) -> None:
    assert next_utc_midnight(now) == expected


# ── Model bench ──────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("count", "expected"), [(0, None), (1, None), (2, None), (3, 600.0), (7, 600.0)])
def test_bench_decision(count: int, expected: float | None) -> None:
    assert bench_decision(count, CFG) == expected


def test_bench_decision_settings() -> None:
    cfg = FallbackConfig(model_bench_failures=5, model_bench_cooldown_s=60.0)
    assert bench_decision(4, cfg) is None
    assert bench_decision(5, cfg) == 60.0
    assert bench_decision(100, FallbackConfig(model_bench_failures=0)) is None


# ── Local base URLs ──────────────────────────────────────────────────────────────────────────────

LOCAL_URLS = [
    ("http://localhost:11434/v1", True),
    ("http://LOCALHOST/v1", True),
    ("http://api.localhost/v1", True),
    ("http://127.0.0.1:8080/v1", True),
    ("http://127.8.9.10", True),
    ("http://[::1]:8000/v1", True),
    ("http://0.0.0.0:1234", True),
    ("http://10.1.2.3/v1", True),
    ("http://172.16.0.1", True),
    ("http://172.31.255.255", True),
    ("http://192.168.1.50:1234/v1", True),
    ("http://169.254.10.10", True),
    ("http://100.101.102.103:11434", True),  # Tailscale / CGNAT
    ("http://[fd12:3456::1]/v1", True),
    ("http://[fe80::1%25eth0]/v1", True),
    ("http://[::ffff:192.168.0.1]/", True),
    ("http://studio.local:1234/v1", True),
    ("http://nas.lan:8080", True),
    ("http://host.docker.internal:11434", True),
    ("localhost:8080", True),
    ("192.168.1.5:1234", True),
    ("https://api.groq.com/openai/v1", False),
    ("https://generativelanguage.googleapis.com", False),
    ("http://172.32.0.1", False),
    ("http://8.8.8.8", False),
    ("http://100.128.0.1", False),
    ("http://[2001:4860::1]/", False),
    ("http://local.example.com", False),
    ("", False),
    ("http://[broken", False),
    ("not a url", False),
]


@pytest.mark.parametrize(("url", "local"), LOCAL_URLS)
def test_is_local_base_url(url: str, local: bool) -> None:
    assert is_local_base_url(url) is local
