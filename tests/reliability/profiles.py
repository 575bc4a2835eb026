"""The fault profiles: one fault on the first route (``flaky``), a healthy route (``steady``) behind it.

Every healthy answer is :data:`~tests.reliability.client.TEXT` in :data:`CHUNKS` chunks, so "correct"
means the same thing whichever route answered. A scripted fault applies to every request that reaches
``flaky`` (``times: null``); the gateway runs with the local cooldown and the model bench off, so every
request really meets the fault instead of being routed around it after the first one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tests.reliability.client import TEXT

__all__ = [
    "CHUNKS",
    "FIRST_BYTE_TIMEOUT_S",
    "HEALTHY",
    "PROFILES",
    "RELAXED_STALL_TIMEOUT_S",
    "STALL_TIMEOUT_S",
    "STEADY_FIRST_BYTE_TIMEOUT_S",
    "Profile",
    "profile",
]

CHUNKS: Final = 6
CHUNK_DELAY_MS: Final = 2.0
"""A little time between chunks, so a stream is really in flight when a process is killed under it."""
HEALTHY: Final[dict[str, Any]] = {"text": TEXT, "chunks": CHUNKS, "chunk_delay_ms": CHUNK_DELAY_MS}
STALL_TIMEOUT_S: Final = 1.0
"""``stream.stall_timeout_s`` in the stall profiles: how long a silent stream is waited on."""
RELAXED_STALL_TIMEOUT_S: Final = 10.0
"""``stream.stall_timeout_s`` everywhere else. The clients, the gateway and the simulator share one
process, and at 64 clients its loop can lag for most of a second on a busy machine: a short timeout
there would cut healthy streams of ``steady`` for the harness's own sake, not the upstream's."""
FIRST_BYTE_TIMEOUT_S: Final = 1.0
"""``flaky``'s first-byte timeout (its ``timeout_s``; a non-stream answer must arrive whole by then)."""
STEADY_FIRST_BYTE_TIMEOUT_S: Final = 10.0
"""``steady``'s, generous for the same reason as :data:`RELAXED_STALL_TIMEOUT_S`."""
SLOW_TTFB_MS: Final = 250

Kind = Literal["baseline", "scripted", "refused", "killed"]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    title: str
    """What the fault is, for the table in docs/reliability.md."""
    kind: Kind = "scripted"
    scenario: dict[str, Any] = field(default_factory=dict)
    """The simulator scenario ``flaky`` answers with (``scripted``); for ``baseline``, what ``steady``
    answers with instead of :data:`HEALTHY` when given."""
    post_commit: bool = False
    """Whether the fault can land after the commit point on a stream: then a stream ended in-band is
    the expected outcome, not a client-visible failure."""
    fails_over: bool = True
    """Whether requests are expected to reach ``steady`` after trying ``flaky`` (a slow first byte
    under the timeout is no failure, so it does not)."""
    stall_timeout_s: float = RELAXED_STALL_TIMEOUT_S
    """The gateway's ``stream.stall_timeout_s`` for this profile (short only where the fault is a stall)."""
    hang_up: bool = False
    """Whether every other stream's client hangs up after its first content frame (the fault is the
    client's: the gateway must let go of the upstream request it was serving)."""


def _faulty(**fault: Any) -> dict[str, Any]:
    return {**HEALTHY, **fault}


PROFILES: Final[tuple[Profile, ...]] = (
    Profile("baseline", "no fault: `steady` alone", kind="baseline", fails_over=False),
    Profile(
        "cut_before_first_byte",
        "connection cut before the first content chunk",
        scenario=_faulty(cut_after=0),
    ),
    Profile(
        "cut_mid_stream",
        "connection cut after 3 of 6 content chunks",
        scenario=_faulty(cut_after=3),
        post_commit=True,
    ),
    Profile(
        "stall",
        f"headers, then silence (stall timeout {STALL_TIMEOUT_S:g} s; a non-stream call never answers, "
        f"first-byte timeout {FIRST_BYTE_TIMEOUT_S:g} s)",
        scenario=_faulty(stall_after=0),
        stall_timeout_s=STALL_TIMEOUT_S,
    ),
    Profile(
        "stall_mid_stream",
        f"silence after 3 of 6 content chunks (stall timeout {STALL_TIMEOUT_S:g} s; a non-stream call "
        "never answers)",
        scenario=_faulty(stall_after=3),
        post_commit=True,
        stall_timeout_s=STALL_TIMEOUT_S,
    ),
    Profile(
        "malformed_frames",
        "garbage lines between the real SSE frames (skipped: `flaky` answers)",
        scenario=_faulty(malformed=True),
        fails_over=False,
    ),
    Profile(
        "inband_error",
        "200, then an in-band error before any content (non-stream: 200 with an error object)",
        scenario=_faulty(inband_error="overloaded"),
    ),
    Profile(
        "inband_error_mid_stream",
        "an in-band error after 3 of 6 content chunks (non-stream: 200 with an error object)",
        scenario=_faulty(inband_error="overloaded", inband_error_after=3),
        post_commit=True,
    ),
    Profile(
        "rate_limit_storm",
        "every request 429 with `Retry-After: 1`",
        scenario=_faulty(status=429, retry_after=1),
    ),
    Profile(
        "slow_ttfb",
        f"first byte after {SLOW_TTFB_MS} ms (under the timeout: answered by `flaky`)",
        scenario=_faulty(first_byte_delay_ms=SLOW_TTFB_MS),
        fails_over=False,
    ),
    Profile(
        "client_hang_up",
        "no upstream fault; every other streaming client hangs up after its first content frame "
        "(`steady` streams with 20 ms between chunks)",
        kind="baseline",
        scenario={**HEALTHY, "chunk_delay_ms": 20.0},
        fails_over=False,
        hang_up=True,
    ),
    Profile("connection_refused", "`flaky` points at a closed port", kind="refused"),
    Profile(
        "killed_restarted",
        "`flaky` is its own simulator process, SIGKILLed at 1/3 of the load and restarted on the same "
        "port at 2/3",
        kind="killed",
        post_commit=True,
    ),
)


def profile(name: str) -> Profile:
    """The profile called ``name``."""
    for p in PROFILES:
        if p.name == name:
            return p
    raise KeyError(name)
