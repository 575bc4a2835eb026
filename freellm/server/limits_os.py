"""The process's open-file limit, raised at start-up so one worker can hold thousands of streams.

Every open stream through the gateway costs two file descriptors (the client's socket and the
upstream's), so the common default soft limit of 1024 caps a worker at about 500 concurrent streams
while the hard limit usually allows far more. An unprivileged process may raise its soft limit up to
the hard limit, so ``serve`` (and ``sim``) do that before listening; when the OS does not allow it (no
``resource`` module, or the call is refused) the gateway logs the limit it is left with and the number
of streams that implies, instead of failing later with ``EMFILE`` under load. The hard limit itself is
never raised: that needs privileges and is the operator's decision (``ulimit -Hn``, systemd's
``LimitNOFILE=``, Docker's ``--ulimit nofile=``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

__all__ = ["FDS_PER_STREAM", "NofileLimit", "raise_nofile_limit"]

log = logging.getLogger("freellm.server")

FDS_PER_STREAM: Final = 2
"""A relayed stream holds the client's connection and the upstream's."""

RESERVED_FDS: Final = 64
"""Descriptors a worker keeps for itself (listening socket, SQLite, logs, Redis, the event loop)."""


@dataclass(frozen=True)
class NofileLimit:
    """What :func:`raise_nofile_limit` found and did (``None`` values: the platform has no such limit)."""

    before: int | None
    soft: int | None
    hard: int | None
    raised: bool
    problem: str | None = None

    @property
    def max_streams(self) -> int | None:
        """Concurrent relayed streams the soft limit leaves room for (an estimate, for the log)."""
        if self.soft is None:
            return None
        return max(0, (self.soft - RESERVED_FDS) // FDS_PER_STREAM)


def _unlimited(value: int) -> bool:
    import resource

    return value == resource.RLIM_INFINITY


def raise_nofile_limit(target: int | None = None) -> NofileLimit:
    """Raise ``RLIMIT_NOFILE``'s soft limit to ``target`` (default: the hard limit), never lowering it.

    Returns what was done; logs an info line when it raised the limit and a warning when it could not.
    An infinite hard limit is capped at 1,048,576 (Linux's default ``fs.nr_open``), since
    ``setrlimit`` refuses ``RLIM_INFINITY`` as a soft file limit on Linux.
    """
    try:
        import resource
    except ImportError:  # Windows: no rlimits, the C runtime's own handle limit applies
        return NofileLimit(None, None, None, raised=False, problem="no resource module on this platform")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if target is None else target
    if _unlimited(want):
        want = 1 << 20
    if not _unlimited(hard):
        want = min(want, hard)
    if _unlimited(soft) or soft >= want:
        return NofileLimit(soft, soft, hard, raised=False)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ValueError, OSError) as exc:
        result = NofileLimit(soft, soft, hard, raised=False, problem=f"{type(exc).__name__}: {exc}")
        log.warning(
            "open-file limit stays at %d (hard %d): raising it to %d failed (%s); one worker can hold "
            "about %d concurrent streams",
            soft,
            hard,
            want,
            result.problem,
            result.max_streams,
        )
        return result
    result = NofileLimit(soft, want, hard, raised=True)
    log.info(
        "open-file limit raised from %d to %d (about %d concurrent streams)", soft, want, result.max_streams
    )
    return result
