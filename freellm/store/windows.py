"""The in-memory containers behind :class:`~freellm.store.memory.MemoryStore`'s hot state: sliding
rate windows with running sums, a scope's live leases with O(1) counts, and per-(name, scope) event
logs. Plain data structures, no I/O: the store composes them (and subclasses persist what they hold)."""

from __future__ import annotations

from collections import deque
from typing import Final

__all__ = [
    "DAY_BUCKET_S",
    "DAY_S",
    "LEASE_SWEEP_EVERY",
    "MINUTE_BUCKET_S",
    "MINUTE_S",
    "EventLog",
    "LeaseSet",
    "ScopeUsage",
    "Window",
]

MINUTE_S: Final = 60.0
DAY_S: Final = 86_400.0

MINUTE_BUCKET_S: Final = 1.0
DAY_BUCKET_S: Final = 60.0
LEASE_SWEEP_EVERY: Final = 1024
"""Sweep every scope's leases once per this many acquisitions (leases normally go by release)."""


class Window:
    """A sliding window of (requests, tokens) in fixed-width buckets with running sums."""

    __slots__ = ("buckets", "requests", "span", "tokens", "width")

    def __init__(self, width: float, span: float) -> None:
        self.width = width
        self.span = span
        self.buckets: deque[list[int]] = deque()
        """``[bucket_index, requests, tokens]``, oldest first; bucket i covers [i·width, (i+1)·width)."""
        self.requests = 0
        self.tokens = 0

    def add_at(self, index: int, requests: int, tokens: int) -> None:
        buckets = self.buckets
        if buckets and buckets[-1][0] >= index:
            # Same bucket, or a caller's ``now`` slightly behind the newest one: fold it into the newest
            # bucket (it then ages out a little later — the conservative side).
            last = buckets[-1]
            last[1] += requests
            last[2] += tokens
        else:
            buckets.append([index, requests, tokens])
        self.requests += requests
        self.tokens += tokens

    def add(self, now: float, requests: int, tokens: int) -> None:
        self.add_at(int(now // self.width), requests, tokens)

    def prune(self, now: float) -> None:
        buckets = self.buckets
        if not buckets:
            return
        cutoff = now - self.span
        width = self.width
        while buckets and (buckets[0][0] + 1) * width <= cutoff:
            _, requests, tokens = buckets.popleft()
            self.requests -= requests
            self.tokens -= tokens

    def frees_at(self) -> float | None:
        """When the oldest bucket leaves the window (after :meth:`prune`); None when empty."""
        buckets = self.buckets
        if not buckets:
            return None
        return (buckets[0][0] + 1) * self.width + self.span


class LeaseSet:
    """One scope's live leases with their token sum kept as they come and go, so counting them is O(1).

    A gateway holding thousands of streams on one key holds as many leases on it, and every routing
    decision reads that count: scanning the leases for expired ones on each read made a request cost
    O(open streams) (28 % of a worker's CPU with 4,000 streams open). Leases are nearly always released;
    expiry is the safety net for a turn that never released its lease, so the set is scanned only once
    ``now`` passes ``min_expiry``, a lower bound of the earliest expiry (exact after a scan, left as is
    when a lease is released): with streams shorter than the lease TTL that is once per TTL or so.
    """

    __slots__ = ("leases", "min_expiry", "tokens")

    def __init__(self) -> None:
        self.leases: dict[str, tuple[int, float]] = {}
        """lease id → (tokens, expiry)."""
        self.tokens = 0
        self.min_expiry = float("inf")

    def __len__(self) -> int:
        return len(self.leases)

    def __contains__(self, lease_id: object) -> bool:
        return lease_id in self.leases

    def add(self, lease_id: str, tokens: int, expiry: float) -> None:
        self.leases[lease_id] = (tokens, expiry)
        self.tokens += tokens
        if expiry < self.min_expiry:
            self.min_expiry = expiry

    def remove(self, lease_id: str) -> bool:
        got = self.leases.pop(lease_id, None)
        if got is None:
            return False
        self.tokens -= got[0]
        return True

    def prune(self, now: float) -> None:
        """Drop the leases expired at ``now`` (a scan only when one may have)."""
        if now < self.min_expiry:
            return
        live = {k: v for k, v in self.leases.items() if v[1] > now}
        self.leases = live
        self.tokens = sum(t for t, _ in live.values())
        self.min_expiry = min((e for _, e in live.values()), default=float("inf"))


class ScopeUsage:
    __slots__ = ("day", "minute")

    def __init__(self) -> None:
        self.minute = Window(MINUTE_BUCKET_S, MINUTE_S)
        self.day = Window(DAY_BUCKET_S, DAY_S)


class EventLog:
    __slots__ = ("horizon", "times")

    def __init__(self, cap: int) -> None:
        self.times: deque[float] = deque(maxlen=cap)
        self.horizon = 0.0
        """The longest window ever asked for this (name, scope): older events can be dropped."""

    def prune(self, now: float, window_s: float) -> None:
        if window_s > self.horizon:
            self.horizon = window_s
        times = self.times
        cutoff = now - self.horizon
        while times and times[0] <= cutoff:
            times.popleft()

    def count(self, now: float, window_s: float) -> int:
        cutoff = now - window_s
        n = 0
        for ts in reversed(self.times):
            if ts <= cutoff:
                break
            n += 1
        return n
