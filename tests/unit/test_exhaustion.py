"""The exhaustion ladder (spec §3): every row, its precedence, and the zero-attempt buckets."""

from __future__ import annotations

from typing import Any

import pytest

from freellm.engine.exhaustion import (
    RouteDiagnostic,
    exhausted_after_attempts,
    exhausted_without_attempts,
    format_attempt_trail,
    retry_after_header,
)
from freellm.engine.failure import Failure, classify
from freellm.errors import Exhausted, TrailEntry, UpstreamError

RETRY_AT = 1_700_000_042_000
NOW_MS = 1_700_000_000_000

# One representative upstream error per trail class.
ERRORS: dict[str, UpstreamError] = {
    "auth": UpstreamError("API error 401: Invalid API Key", status=401),
    "out_of_credits": UpstreamError("API error 402: Payment required", status=402),
    "daily_quota_exhausted": UpstreamError("API error 429: daily quota exhausted", status=429),
    "model_not_found": UpstreamError("API error 404: model not found", status=404),
    "forbidden": UpstreamError("API error 403: Forbidden", status=403),
    "context_too_large": UpstreamError("API error 413: Request Entity Too Large", status=413),
    "provider_bad_request": UpstreamError("API error 400: unsupported parameter", status=400),
    "degraded": UpstreamError("API error 400: DEGRADED function cannot be invoked", status=400),
    "empty_completion": UpstreamError("empty completion"),
    "format_ignored": UpstreamError("ignored response_format", skip_model=True, skip_bench=True),
    "invalid_tool_arguments": UpstreamError("invalid tool arguments", skip_model=True, skip_bench=True),
    "timeout": UpstreamError("no first byte", timeout=True),
    "rate_limited": UpstreamError("API error 429: Too Many Requests", status=429),
    "upstream_error": UpstreamError("API error 503: Service Unavailable", status=503),
    "error": UpstreamError("stream ended unexpectedly"),
}


def attempts(*names: str) -> tuple[list[TrailEntry], list[Failure]]:
    trail: list[TrailEntry] = []
    failures: list[Failure] = []
    for i, name in enumerate(names, start=1):
        f = classify(ERRORS[name])
        failures.append(f)
        trail.append(TrailEntry("p", f"m{i}", i, f.error_class, f.message))
    return trail, failures


def test_fixture_classes() -> None:
    for name, err in ERRORS.items():
        expected = "upstream_error" if name == "degraded" else name
        assert classify(err).error_class == expected, name


def run(*names: str, **kw: Any) -> Exhausted:
    trail, failures = attempts(*names)
    kw.setdefault("breaker_tripped", False)
    kw.setdefault("retry_at_ms", RETRY_AT)
    kw.setdefault("budget_ran_out", False)
    return exhausted_after_attempts(trail, failures, **kw)


# (id, attempt classes, kwargs, (status, type, code), carries retry_at_ms)
LADDER: list[tuple[str, tuple[str, ...], dict[str, Any], tuple[int, str, str], bool]] = [
    ("all auth", ("auth", "auth"), {}, (502, "provider_error", "provider_authentication_failed"), False),
    ("one auth", ("auth",), {}, (502, "provider_error", "provider_authentication_failed"), False),
    (
        "all context too large",
        ("context_too_large", "context_too_large"),
        {},
        (413, "invalid_request_error", "context_length_exceeded"),
        False,
    ),
    (
        "all model not found",
        ("model_not_found",) * 3,
        {},
        (404, "invalid_request_error", "model_not_found"),
        False,
    ),
    (
        "last degraded",
        ("rate_limited", "degraded"),
        {},
        (503, "service_unavailable", "provider_degraded"),
        False,
    ),
    (
        "last provider 400",
        ("timeout", "provider_bad_request"),
        {},
        (400, "invalid_request_error", "provider_rejected_request"),
        False,
    ),
    (
        "breaker",
        ("timeout", "upstream_error"),
        {"breaker_tripped": True},
        (503, "service_unavailable", "upstream_unhealthy"),
        False,
    ),
    (
        "all rate limited",
        ("rate_limited", "rate_limited"),
        {},
        (429, "rate_limit_error", "rate_limit_exceeded"),
        True,
    ),
    (
        "all time-bound mixed",
        ("rate_limited", "daily_quota_exhausted", "out_of_credits", "forbidden"),
        {},
        (429, "rate_limit_error", "rate_limit_exceeded"),
        True,
    ),
    (
        "rate limited + timeout",
        ("rate_limited", "timeout"),
        {},
        (502, "provider_error", "upstream_failed"),
        False,
    ),
    ("all 5xx", ("upstream_error", "upstream_error"), {}, (502, "provider_error", "upstream_failed"), False),
    ("timeouts", ("timeout",), {}, (502, "provider_error", "upstream_failed"), False),
    ("empty completion", ("empty_completion",), {}, (502, "provider_error", "upstream_failed"), False),
    (
        "dead turns",
        ("format_ignored", "invalid_tool_arguments", "error"),
        {},
        (502, "provider_error", "upstream_failed"),
        False,
    ),
    ("auth + rate limited", ("auth", "rate_limited"), {}, (502, "provider_error", "upstream_failed"), False),
    ("auth + timeout", ("auth", "timeout"), {}, (502, "provider_error", "upstream_failed"), False),
    # Precedence between rows.
    (
        "all auth beats breaker",
        ("auth", "auth"),
        {"breaker_tripped": True},
        (502, "provider_error", "provider_authentication_failed"),
        False,
    ),
    (
        "all too large beats breaker",
        ("context_too_large",),
        {"breaker_tripped": True},
        (413, "invalid_request_error", "context_length_exceeded"),
        False,
    ),
    (
        "degraded beats breaker",
        ("timeout", "degraded"),
        {"breaker_tripped": True},
        (503, "service_unavailable", "provider_degraded"),
        False,
    ),
    (
        "provider 400 beats breaker",
        ("timeout", "provider_bad_request"),
        {"breaker_tripped": True},
        (400, "invalid_request_error", "provider_rejected_request"),
        False,
    ),
    (
        "breaker beats all rate limited",
        ("rate_limited", "rate_limited"),
        {"breaker_tripped": True},
        (503, "service_unavailable", "upstream_unhealthy"),
        False,
    ),
    (
        "degraded beats provider 400 (only last counts)",
        ("provider_bad_request", "degraded"),
        {},
        (503, "service_unavailable", "provider_degraded"),
        False,
    ),
    (
        "earlier provider 400 does not count",
        ("provider_bad_request", "timeout"),
        {},
        (502, "provider_error", "upstream_failed"),
        False,
    ),
    (
        "mixed too large and not found",
        ("context_too_large", "model_not_found"),
        {},
        (502, "provider_error", "upstream_failed"),
        False,
    ),
    (
        "not found + rate limit",
        ("model_not_found", "rate_limited"),
        {},
        (502, "provider_error", "upstream_failed"),
        False,
    ),
    (
        "budget ran out",
        ("timeout", "timeout"),
        {"budget_ran_out": True},
        (502, "provider_error", "upstream_failed"),
        False,
    ),
]


@pytest.mark.parametrize(("name", "classes", "kw", "expected", "retry"), LADDER, ids=[t[0] for t in LADDER])
def test_ladder(
    name: str, classes: tuple[str, ...], kw: dict[str, Any], expected: tuple[int, str, str], retry: bool
) -> None:
    exc = run(*classes, **kw)
    assert (exc.status, exc.type, exc.code) == expected
    assert exc.status != 500
    assert exc.retry_at_ms == (RETRY_AT if retry else None)
    assert len(exc.trail) == len(classes)


def test_429_without_known_retry_time() -> None:
    exc = run("rate_limited", retry_at_ms=None)
    assert exc.status == 429
    assert exc.retry_at_ms is None
    assert "retryAtMs" not in exc.envelope()["error"]


def test_429_envelope_carries_retry_at() -> None:
    exc = run("rate_limited")
    assert exc.envelope()["error"]["retryAtMs"] == RETRY_AT


def test_message_has_trail_and_last_error() -> None:
    exc = run("rate_limited", "timeout")
    assert "Attempt trail: p/m1 key1: rate_limited; p/m2 key2: timeout." in exc.message
    assert exc.message.endswith("Last error: no first byte")
    assert "rate_limited x1" in exc.message and "timeout x1" in exc.message


def test_message_trail_capped_at_ten() -> None:
    exc = run(*(["timeout"] * 13))
    assert "p/m10 key10: timeout; +3 more." in exc.message
    assert "m11" not in exc.message


def test_last_error_redacted_and_capped() -> None:
    key = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
    err = UpstreamError(f"API error 503: leaked {key} " + "y" * 500, status=503)
    f = classify(err)
    trail = [TrailEntry("p", "m", 1, f.error_class)]
    exc = exhausted_after_attempts(trail, [f], breaker_tripped=False, retry_at_ms=None, budget_ran_out=False)
    last = exc.message.split("Last error: ", 1)[1]
    assert key not in exc.message
    assert len(last) <= 240


def test_budget_note() -> None:
    exc = run("timeout", "timeout", budget_ran_out=True, budget_s=45.0)
    assert "retry time budget of 45s ran out" in exc.message
    assert "budget" not in run("timeout").message


def test_soonest_reset_note() -> None:
    exc = run("rate_limited", now_ms=NOW_MS)
    assert "Soonest reset ~42s." in exc.message
    assert "Soonest reset" not in run("rate_limited").message


def test_no_failures_falls_back_to_502() -> None:
    exc = exhausted_after_attempts([], [], breaker_tripped=False, retry_at_ms=RETRY_AT, budget_ran_out=False)
    assert (exc.status, exc.code) == (502, "upstream_failed")
    assert "Last error: unknown error" in exc.message


def test_format_attempt_trail() -> None:
    trail = [TrailEntry("groq", "llama", i, "rate_limited") for i in range(1, 4)]
    assert format_attempt_trail(trail) == (
        "groq/llama key1: rate_limited; groq/llama key2: rate_limited; groq/llama key3: rate_limited"
    )
    assert format_attempt_trail([]) == ""


# ── Zero attempts ────────────────────────────────────────────────────────────────────────────────


def D(kind: str, route: str = "p/m") -> RouteDiagnostic:
    return RouteDiagnostic(route, kind, "detail")


ZERO: list[tuple[str, list[str], tuple[int, str, str], bool]] = [
    ("no diagnostics", [], (503, "service_unavailable", "no_providers_configured"), False),
    (
        "only config",
        ["no_provider", "no_key", "decrypt"],
        (503, "service_unavailable", "no_providers_configured"),
        False,
    ),
    (
        "too large",
        ["too_large", "too_large"],
        (413, "invalid_request_error", "context_length_exceeded"),
        False,
    ),
    (
        "too large + config",
        ["too_large", "no_key"],
        (413, "invalid_request_error", "context_length_exceeded"),
        False,
    ),
    ("cooldown", ["cooldown"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("rpm", ["rpm"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("rpd", ["rpd"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("tpm", ["tpm"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("tpd", ["tpd"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("cap", ["cap"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("concurrency", ["concurrency"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("time-bound + config", ["cooldown", "no_key"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("time-bound + too large", ["tpm", "too_large"], (429, "rate_limit_error", "rate_limit_exceeded"), True),
    ("capability", ["capability"], (429, "rate_limit_error", "routing_exhausted"), False),
    (
        "capability + cooldown",
        ["capability", "cooldown"],
        (429, "rate_limit_error", "routing_exhausted"),
        False,
    ),
    ("skipped", ["skipped"], (429, "rate_limit_error", "routing_exhausted"), False),
    ("disabled", ["disabled", "no_key"], (429, "rate_limit_error", "routing_exhausted"), False),
    ("unknown kind", ["mystery"], (429, "rate_limit_error", "routing_exhausted"), False),
    (
        "too large + capability",
        ["too_large", "capability"],
        (429, "rate_limit_error", "routing_exhausted"),
        False,
    ),
]


@pytest.mark.parametrize(("name", "kinds", "expected", "retry"), ZERO, ids=[t[0] for t in ZERO])
def test_zero_attempts(name: str, kinds: list[str], expected: tuple[int, str, str], retry: bool) -> None:
    exc = exhausted_without_attempts([D(k) for k in kinds], retry_at_ms=RETRY_AT, now_ms=NOW_MS)
    assert (exc.status, exc.type, exc.code) == expected
    assert exc.retry_at_ms == (RETRY_AT if retry else None)
    assert exc.trail == []


def test_zero_attempt_message_buckets() -> None:
    diags = [D("cooldown"), D("rpm"), D("concurrency"), D("too_large"), D("no_key")]
    exc = exhausted_without_attempts(diags, retry_at_ms=RETRY_AT, now_ms=NOW_MS)
    assert exc.message == (
        "All models exhausted: 5 routes checked (3 rate-limited or on cooldown, 1 too small for the request, "
        "1 without a configured provider or usable key). Soonest reset ~42s."
    )


def test_zero_attempt_message_without_reset() -> None:
    exc = exhausted_without_attempts([D("cooldown")], retry_at_ms=None, now_ms=NOW_MS)
    assert exc.message == "All models exhausted: 1 route checked (1 rate-limited or on cooldown)."
    past = exhausted_without_attempts([D("cooldown")], retry_at_ms=NOW_MS - 5, now_ms=NOW_MS)
    assert "Soonest reset" not in past.message


def test_zero_attempt_capability_message() -> None:
    exc = exhausted_without_attempts([D("capability"), D("disabled")], retry_at_ms=None, now_ms=NOW_MS)
    assert "1 missing a required capability" in exc.message
    assert "1 skipped or disabled" in exc.message


# ── Retry-After ──────────────────────────────────────────────────────────────────────────────────

RETRY_AFTER = [
    (None, None),
    (NOW_MS + 42_000, "42"),
    (NOW_MS + 41_001, "42"),
    (NOW_MS + 1, "1"),
    (NOW_MS, "1"),
    (NOW_MS - 10_000, "1"),
    (NOW_MS + 86_400_000, "86400"),
]


@pytest.mark.parametrize(("retry_at", "expected"), RETRY_AFTER)
def test_retry_after_header(retry_at: int | None, expected: str | None) -> None:
    assert retry_after_header(retry_at, NOW_MS) == expected
