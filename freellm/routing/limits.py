"""The RPM/RPD/TPM/TPD gate of one key (spec §2 "Rate limiting").

A pure function over the model's known limits and the key scope's :class:`UsageSnapshot` (windows plus
in-flight leases, as returned by ``StateStore.usage``); the router calls it for each candidate key after
the cooldown and provider-cap gates and before taking a lease.

* requests: deny when ``used + leased >= limit`` (the request being routed would be one too many);
* tokens: deny when ``used + leased + estimate > limit``;
* a ``None`` limit is unknown, i.e. unlimited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from freellm.config import ModelLimits
from freellm.store.base import UsageSnapshot

__all__ = ["LimitReason", "LimitVerdict", "check_limits"]

LimitReason = Literal["rpm", "rpd", "tpm", "tpd"]


@dataclass(frozen=True, slots=True)
class LimitVerdict:
    ok: bool
    reason: LimitReason | None
    """The binding axis when denied: a daily one wins over a minute one, requests over tokens."""
    retry_at: float | None
    """Epoch seconds, best effort: the latest ``*_frees_at`` among the denied axes whose window holds usage
    that will age out — no retry can pass before it. None when no such window is known: only leases are in
    the way (they go when released), the estimate alone exceeds a token limit, or the store gives no
    timestamps."""


ALLOWED: Final = LimitVerdict(ok=True, reason=None, retry_at=None)


def check_limits(limits: ModelLimits, usage: UsageSnapshot, estimate: int) -> LimitVerdict:
    """Whether one more request of ``estimate`` tokens fits the key scope's windows right now."""
    rpm, rpd, tpm, tpd = limits.rpm, limits.rpd, limits.tpm, limits.tpd
    if rpm is None and rpd is None and tpm is None and tpd is None:
        return ALLOWED

    reason: LimitReason | None = None
    retry_at: float | None = None

    # Precedence (the reported reason is the first denied in this order): daily before minute, since a
    # day window exhausted is the binding one and drives the cooldown ladder; requests before tokens.
    leased = usage.leased_requests
    if rpd is not None and usage.requests_day + leased >= rpd:
        reason = "rpd"
        if leased < rpd:
            retry_at = usage.day_frees_at
    leased_tokens = usage.leased_tokens + estimate
    if tpd is not None and usage.tokens_day + leased_tokens > tpd:
        if reason is None:
            reason = "tpd"
        if leased_tokens <= tpd:
            retry_at = _later(retry_at, usage.day_frees_at)
    if rpm is not None and usage.requests_minute + leased >= rpm:
        if reason is None:
            reason = "rpm"
        if leased < rpm:
            retry_at = _later(retry_at, usage.minute_frees_at)
    if tpm is not None and usage.tokens_minute + leased_tokens > tpm:
        if reason is None:
            reason = "tpm"
        if leased_tokens <= tpm:
            retry_at = _later(retry_at, usage.minute_frees_at)

    if reason is None:
        return ALLOWED
    return LimitVerdict(ok=False, reason=reason, retry_at=retry_at)


def _later(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None or b <= a:
        return a
    return b
