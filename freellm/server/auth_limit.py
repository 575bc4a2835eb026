"""Per-IP limiting of failed authentications (``server.auth_failure_limit_per_min``).

Counted apart from authenticated traffic: only a request that *fails* authentication is counted, and
only such a request is ever refused with 429. A client with a valid key is never throttled by it, even
from an address (a NAT, the reverse proxy in front of the gateway) whose other users keep sending bad
keys — that is the per-IP request limiter's job (``server.ip_rate_limit_rpm``), not this one's.

What it is for: a client that keeps sending bad keys gets told to back off, costs the gateway one
counter bump per request, and produces at most one log line per address per window — so guessing keys
cannot flood the log. (Key guessing itself is defeated by the keys' entropy, not by this limiter: a
valid key is still accepted past the limit, by design.)

Fixed 60-second windows aligned to the clock, like :class:`freellm.server.middleware.IPRateLimiter`;
state is in memory, per process, on the app (one limiter per :class:`~freellm.server.state.Gateway`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_MAX_TRACKED", "AuthFailureLimiter", "AuthVerdict"]

DEFAULT_MAX_TRACKED: Final = 65_536
"""Addresses tracked per window. Past it, new addresses are not counted until the window turns: memory
stays bounded however many source addresses an attacker has (an IPv6 /64 has plenty)."""


@dataclass(frozen=True, slots=True)
class AuthVerdict:
    """The outcome of one failed authentication."""

    limited: bool
    """Over the limit: answer 429 instead of 401."""
    retry_after_s: int
    """Seconds until the window turns (the ``Retry-After`` value)."""
    first_over: bool
    """This failure is the first one over the limit in this window: the one to log."""


class AuthFailureLimiter:
    """Counts failed authentications per client address in fixed windows. ``limit <= 0`` turns it off."""

    def __init__(self, limit: int, window_s: float = 60.0, max_tracked: int = DEFAULT_MAX_TRACKED) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_tracked = max_tracked
        self._window_start = 0.0
        self._failures: dict[str, int] = {}

    def failed(self, ip: str, now: float) -> AuthVerdict:
        """Count one failed authentication from ``ip`` at ``now`` (epoch seconds)."""
        if self.limit <= 0:
            return AuthVerdict(False, 0, False)
        if now - self._window_start >= self.window_s:
            self._window_start = now - (now % self.window_s)
            self._failures.clear()
        retry = max(1, math.ceil(self._window_start + self.window_s - now))
        count = self._failures.get(ip)
        if count is None:
            if len(self._failures) >= self.max_tracked:
                return AuthVerdict(False, retry, False)
            count = 0
        count += 1
        self._failures[ip] = count
        return AuthVerdict(count > self.limit, retry, count == self.limit + 1)
