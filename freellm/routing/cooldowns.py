"""Cooldown duration policy: how long a (provider, model, key) sits out after a failure.

Spec §3 "Cooldown", first matching row wins:

====================================================  ==========================================  =============
condition                                             duration                                    source
====================================================  ==========================================  =============
key-auth (401 / invalid key)                          ``cooldown_auth_s`` (5 min)                 auth
402 / no credits                                      ``cooldown_credit_s`` (24 h)                credit
403 / model access                                    ``cooldown_tier_s`` (24 h)                  tier
daily quota wording                                   Retry-After, else next UTC midnight (≥60 s)  authoritative
key with a loopback/LAN ``base_url``                  ``cooldown_local_s`` (5 s), no Retry-After   heuristic
everything else                                       ``cooldown_default_s`` (90 s)               heuristic
====================================================  ==========================================  =============

The ladder 2 m → 10 m → 1 h → 24 h replaces the 90 s only when the measured RPD/TPD is exhausted, or
when both daily limits are unknown and ≥ 2 real rate-limit hits arrived within the hour (then capped at
``cooldown_null_limit_cap_s``). Timeouts and 5xx never escalate. A longer Retry-After wins (≤ 24 h,
authoritative). skipBench failures and context-too-large get no cooldown at all.

The caller owns the counters (they live in the ``StateStore`` as events): this module only decides.
Pure: ``now`` is a parameter, no I/O.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from freellm.config import FallbackConfig
from freellm.engine.failure import CooldownKind, Failure, FailureKind

__all__ = [
    "MIN_MIDNIGHT_COOLDOWN_S",
    "NULL_LIMIT_HIT_THRESHOLD",
    "CooldownDecision",
    "bench_decision",
    "decide_cooldown",
    "is_local_base_url",
    "next_utc_midnight",
]

DAY_S: Final = 86400.0
MIN_MIDNIGHT_COOLDOWN_S: Final = 60.0
"""A daily-quota hit seconds before midnight still benches for a minute."""
NULL_LIMIT_HIT_THRESHOLD: Final = 2
"""Real rate-limit hits within the hour that make an unknown-limit route count as exhausted."""

# Host names that always mean "this machine or the LAN" (llama.cpp, Ollama, LM Studio, vLLM at home).
LOCAL_HOSTNAMES: Final = frozenset({"localhost", "host.docker.internal", "gateway.docker.internal"})
LOCAL_SUFFIXES: Final = (".localhost", ".local", ".lan", ".home.arpa", ".internal")
CGNAT: Final = ipaddress.ip_network("100.64.0.0/10")  # Tailscale / carrier-grade NAT: a private peer


@dataclass(frozen=True, slots=True)
class CooldownDecision:
    seconds: float
    source: str
    """``heuristic`` | ``authoritative`` | ``credit`` | ``tier`` | ``auth`` (as in ``CooldownRecord``)."""
    escalated: bool = False
    """The ladder was used: the caller records one ladder hit for this scope."""


def next_utc_midnight(now: float) -> float:
    """Epoch seconds of the first UTC midnight strictly after ``now`` (epoch days are UTC-aligned)."""
    return (math.floor(now / DAY_S) + 1) * DAY_S


def _never_escalates(failure: Failure) -> bool:
    # Timeouts, 5xx, transport and degraded deployments say nothing about quota.
    return failure.skip_provider or failure.error_class in ("timeout", "upstream_error")


def decide_cooldown(
    failure: Failure,
    *,
    now: float,
    is_local: bool,
    cfg: FallbackConfig,
    daily_exhausted: bool,
    limits_unknown: bool,
    ladder_hits_24h: int,
    rate_limit_hits_1h: int,
) -> CooldownDecision | None:
    """How long to cool the (provider, model, key) down after ``failure``; None for no cooldown.

    * ``daily_exhausted``: the measured RPD or TPD of this scope is spent (counter ≥ limit).
    * ``limits_unknown``: the scope has neither an RPD nor a TPD figure.
    * ``ladder_hits_24h``: ladder escalations of this scope in the last 24 h, *before* this one
      (0 → first step). Record one more when the decision says ``escalated``.
    * ``rate_limit_hits_1h``: real rate-limit hits of this scope in the last hour, *including* this
      one (record the hit before asking when ``failure.rate_limit_signal`` and limits are unknown).
    """
    if failure.kind is FailureKind.FATAL or failure.skip_bench or failure.cooldown is CooldownKind.NONE:
        return None
    cap = cfg.cooldown_max_s
    kind = failure.cooldown
    if kind is CooldownKind.AUTH:
        return CooldownDecision(min(cfg.cooldown_auth_s, cap), "auth")
    if kind is CooldownKind.CREDIT:
        return CooldownDecision(min(cfg.cooldown_credit_s, cap), "credit")
    if kind is CooldownKind.TIER:
        return CooldownDecision(min(cfg.cooldown_tier_s, cap), "tier")
    if kind is CooldownKind.DAILY:
        if failure.retry_after_s is not None:
            return CooldownDecision(min(failure.retry_after_s, cap), "authoritative")
        until_midnight = max(next_utc_midnight(now) - now, MIN_MIDNIGHT_COOLDOWN_S)
        return CooldownDecision(min(until_midnight, cap), "authoritative")
    if is_local:
        # No quota behind a local server: a failure means "busy right now". Ignores Retry-After and
        # never enters the ladder, even for a literal 429.
        return CooldownDecision(min(cfg.cooldown_local_s, cap), "heuristic")

    base = cfg.cooldown_default_s
    escalated = False
    if not _never_escalates(failure):
        guessed = (
            limits_unknown and failure.rate_limit_signal and rate_limit_hits_1h >= NULL_LIMIT_HIT_THRESHOLD
        )
        if (daily_exhausted or guessed) and cfg.cooldown_ladder_s:
            ladder = cfg.cooldown_ladder_s
            base = ladder[min(max(ladder_hits_24h, 0), len(ladder) - 1)]
            if not daily_exhausted:
                base = min(base, cfg.cooldown_null_limit_cap_s)  # a guess never benches past the cap
            escalated = True
    base = min(base, cap)
    hint = failure.retry_after_s
    if hint is not None and hint > base:
        return CooldownDecision(min(hint, cap), "authoritative", escalated)
    return CooldownDecision(base, "heuristic", escalated)


def bench_decision(failures_in_window: int, cfg: FallbackConfig) -> float | None:
    """Seconds to bench every key of a model after ``failures_in_window`` recent failures, or None.

    Count only failures that got a cooldown (not skipBench, not context-too-large, not key-auth) within
    ``cfg.model_bench_window_s``, this one included. The bench never shortens a longer cooldown (the
    store's ``set_cooldown`` guarantees that); clear the window after benching (one bench per streak).
    """
    if cfg.model_bench_failures <= 0 or failures_in_window < cfg.model_bench_failures:
        return None
    return cfg.model_bench_cooldown_s


def is_local_base_url(url: str) -> bool:
    """True for a loopback, RFC 1918 / ULA / link-local / CGNAT address, ``localhost`` or ``*.local``."""
    text = url.strip()
    if not text:
        return False
    if "://" not in text:
        text = "//" + text
    try:
        host = urlsplit(text).hostname
    except ValueError:
        return False
    if not host:
        return False
    host = host.rstrip(".").lower()
    if host in LOCAL_HOSTNAMES or host.endswith(LOCAL_SUFFIXES):
        return True
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if isinstance(addr, ipaddress.IPv4Address) and addr in CGNAT:
        return True
    return addr.is_loopback or addr.is_private or addr.is_link_local or addr.is_unspecified
