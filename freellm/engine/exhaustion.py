"""The exhaustion ladder: the one terminal status when the fallback loop runs out of routes.

Two entry points, both pure:

* :func:`exhausted_after_attempts` — at least one upstream attempt failed. The first matching row of
  spec §3 "Exhaustion after at least one attempt" wins; the answer is never 500.
* :func:`exhausted_without_attempts` — the router found nothing to try; decided from its per-route
  diagnostics (spec §3 "Zero attempts").

Both return an :class:`~freellm.errors.Exhausted` that every surface renders in its own envelope. A 429
carries ``retry_at_ms`` (soonest expiry of any active cooldown), sent as ``Retry-After`` too
(:func:`retry_after_header`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from freellm.engine.failure import Failure
from freellm.engine.redact import redact
from freellm.errors import Exhausted, TrailEntry

__all__ = [
    "DIAGNOSTIC_KINDS",
    "RouteDiagnostic",
    "exhausted_after_attempts",
    "exhausted_without_attempts",
    "format_attempt_trail",
    "retry_after_header",
]

TRAIL_MAX_SHOWN: Final = 10
LAST_ERROR_LIMIT: Final = 240

# Classes meaning "unavailable until a known time": when *every* attempt is one of these the pool
# recovers by itself, so the honest answer is a 429 with a retry time.
UNAVAILABLE_UNTIL_KNOWN_TIME: Final = frozenset(
    {"rate_limited", "daily_quota_exhausted", "out_of_credits", "forbidden"}
)

# ── Zero-attempt diagnostics ──────────────────────────────────────────────────────────────────────

CONFIG_KINDS: Final = frozenset({"no_provider", "no_key", "decrypt", "key_disabled"})
TOO_LARGE_KINDS: Final = frozenset({"too_large"})
TIME_BOUND_KINDS: Final = frozenset(
    {"cooldown", "learned_limit", "rpm", "rpd", "tpm", "tpd", "cap", "concurrency"}
)
CAPABILITY_KINDS: Final = frozenset({"capability", "no_tools", "no_vision"})
SKIPPED_KINDS: Final = frozenset({"skipped", "disabled", "retired"})
DIAGNOSTIC_KINDS: Final = CONFIG_KINDS | TOO_LARGE_KINDS | TIME_BOUND_KINDS | CAPABILITY_KINDS | SKIPPED_KINDS

# (bucket, label) in the order the message lists them.
_BUCKETS: Final = (
    ("time_bound", "rate-limited or on cooldown"),
    ("too_large", "too small for the request"),
    ("config", "without a configured provider or usable key"),
    ("capability", "missing a required capability"),
    ("skipped", "skipped or disabled"),
    ("other", "unavailable for another reason"),
)


@dataclass(frozen=True, slots=True)
class RouteDiagnostic:
    """Why the router passed over one route: ``route`` is ``provider/model``, ``kind`` one of
    :data:`DIAGNOSTIC_KINDS` (unknown kinds count as "other"), ``detail`` free text for logs."""

    route: str
    kind: str
    detail: str = ""


def _bucket(kind: str) -> str:
    if kind in CONFIG_KINDS:
        return "config"
    if kind in TOO_LARGE_KINDS:
        return "too_large"
    if kind in TIME_BOUND_KINDS:
        return "time_bound"
    if kind in CAPABILITY_KINDS:
        return "capability"
    if kind in SKIPPED_KINDS:
        return "skipped"
    return "other"


def retry_after_header(retry_at_ms: int | None, now_ms: int) -> str | None:
    """``Retry-After`` seconds for an exhaustion carrying ``retry_at_ms``: ceil, at least 1."""
    if retry_at_ms is None:
        return None
    return str(max(1, math.ceil((retry_at_ms - now_ms) / 1000)))


def _reset_note(retry_at_ms: int | None, now_ms: int | None) -> str:
    if retry_at_ms is None or now_ms is None:
        return ""
    return f" Soonest reset ~{max(1, math.ceil((retry_at_ms - now_ms) / 1000))}s."


def format_attempt_trail(trail: Sequence[TrailEntry]) -> str:
    """``p/m key1: class; p2/m2 key2: class`` (at most 10, then ``; +N more``)."""
    shown = "; ".join(
        f"{e.provider}/{e.model} key{e.key_n}: {e.error_class}" for e in trail[:TRAIL_MAX_SHOWN]
    )
    extra = len(trail) - TRAIL_MAX_SHOWN
    return shown + (f"; +{extra} more" if extra > 0 else "")


def _breakdown(trail: Sequence[TrailEntry]) -> str:
    counts = Counter(e.error_class for e in trail)
    if not counts:
        return ""
    parts = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return " (" + ", ".join(f"{cls} x{n}" for cls, n in parts) + ")"


def exhausted_after_attempts(
    trail: list[TrailEntry],
    failures: list[Failure],
    *,
    breaker_tripped: bool,
    retry_at_ms: int | None,
    budget_ran_out: bool,
    budget_s: float | None = None,
    now_ms: int | None = None,
) -> Exhausted:
    """The terminal error after ≥ 1 failed attempt. ``failures[-1]`` is the last error.

    ``retry_at_ms`` is the soonest expiry of any active cooldown; only the 429 row carries it.
    ``budget_ran_out`` adds a note that the wall-clock budget (``budget_s``) stopped the loop.
    ``now_ms``, when given, adds "Soonest reset ~Ns." to the 429 and breaker messages.
    """
    n = len(trail)
    classes = [e.error_class for e in trail]
    last = failures[-1] if failures else None
    last_msg = redact(last.message, limit=LAST_ERROR_LIMIT) if last is not None else ""
    last_error = f" Last error: {last_msg or 'unknown error'}"
    trail_note = f" Attempt trail: {format_attempt_trail(trail)}." if trail else ""
    if budget_ran_out:
        budget = f" of {budget_s:g}s" if budget_s else ""
        budget_note = f" (stopped early: the retry time budget{budget} ran out)"
    else:
        budget_note = ""

    def every(allowed: frozenset[str]) -> bool:
        return n > 0 and all(c in allowed for c in classes)

    def done(status: int, type_: str, code: str, lead: str, *, retry: int | None = None) -> Exhausted:
        return Exhausted(
            status=status,
            type=type_,
            code=code,
            message=f"{lead}{trail_note}{last_error}",
            trail=list(trail),
            retry_at_ms=retry,
        )

    if every(frozenset({"auth"})):
        return done(
            502,
            "provider_error",
            "provider_authentication_failed",
            f"All {n} attempted provider key(s) failed authentication{budget_note}. The configured upstream "
            "API key(s) look invalid or expired; check the provider keys.",
        )
    if every(frozenset({"context_too_large"})):
        return done(
            413,
            "invalid_request_error",
            "context_length_exceeded",
            f"The request is too large for every routed model: all {n} attempt(s) were rejected as over the "
            f"model's context or size limit{budget_note}. Reduce the prompt or use a larger-context model.",
        )
    if every(frozenset({"model_not_found"})):
        return done(
            404,
            "invalid_request_error",
            "model_not_found",
            f"Every routed provider reports the model as not found or removed ({n} attempt(s)){budget_note}.",
        )
    if last is not None and last.degraded:
        return done(
            503,
            "service_unavailable",
            "provider_degraded",
            f"The provider reported the model's deployment as temporarily degraded{budget_note}. "
            "Retry later.",
        )
    if last is not None and last.provider_bad_request:
        return done(
            400,
            "invalid_request_error",
            "provider_rejected_request",
            f"The routed providers rejected the request as invalid{budget_note}.",
        )
    if breaker_tripped:
        return done(
            503,
            "service_unavailable",
            "upstream_unhealthy",
            f"Failover stopped by the circuit breaker after {n} consecutive upstream failure(s); the pool "
            f"looks unhealthy right now.{_reset_note(retry_at_ms, now_ms)}",
        )
    if every(UNAVAILABLE_UNTIL_KNOWN_TIME):
        return done(
            429,
            "rate_limit_error",
            "rate_limit_exceeded",
            f"All models rate-limited after {n} attempt(s){budget_note}.{_reset_note(retry_at_ms, now_ms)}",
            retry=retry_at_ms,
        )
    return done(
        502,
        "provider_error",
        "upstream_failed",
        f"All {n} routed attempt(s) failed with upstream provider errors{_breakdown(trail)}{budget_note}.",
    )


def exhausted_without_attempts(
    diagnostics: list[RouteDiagnostic], *, retry_at_ms: int | None, now_ms: int
) -> Exhausted:
    """The terminal error when the router found no route to try, from its per-route diagnostics."""
    buckets = Counter(_bucket(d.kind) for d in diagnostics)
    total = len(diagnostics)
    summary = ", ".join(f"{buckets[b]} {label}" for b, label in _BUCKETS if buckets[b])
    checked = f"{total} route{'s' if total != 1 else ''} checked" + (f" ({summary})" if summary else "")
    reset = _reset_note(retry_at_ms, now_ms) if retry_at_ms is not None and retry_at_ms > now_ms else ""
    kinds = set(buckets)

    if not diagnostics or kinds <= {"config"}:
        lead = (
            "No models are configured to serve this request. Add provider API keys and enable models."
            if not diagnostics
            else f"No candidate model has a configured, usable provider key: {checked}."
        )
        return Exhausted(503, "service_unavailable", "no_providers_configured", lead)
    if "too_large" in kinds and kinds <= {"too_large", "config"}:
        return Exhausted(
            413,
            "invalid_request_error",
            "context_length_exceeded",
            f"The request is too large for every available model's context or token window: {checked}. "
            "Reduce the prompt or use a larger-context model.",
        )
    if "time_bound" in kinds and kinds <= {"time_bound", "too_large", "config"}:
        return Exhausted(
            429,
            "rate_limit_error",
            "rate_limit_exceeded",
            f"All models exhausted: {checked}.{reset}",
            retry_at_ms=retry_at_ms,
        )
    return Exhausted(429, "rate_limit_error", "routing_exhausted", f"All models exhausted: {checked}.{reset}")
