"""Small helpers shared by the Python-side measurers (TTFB probe, fallback load generator)."""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import Callable, Sequence

VARY = "@@VARY@@"
"""In a request body: replaced by a string unique to each request (see :func:`body_source`)."""


def body_source(body: bytes) -> Callable[[], bytes]:
    """A function returning the body of the next request: ``body`` itself, or, when it contains
    :data:`VARY`, ``body`` with the marker replaced by ``<nonce>.py.<n>`` (a random nonce for this process,
    a counter), so that every request differs from every other of the run."""
    marker = VARY.encode()
    if marker not in body:
        return lambda: body
    head, tail = body.split(marker, 1)
    nonce = secrets.token_hex(4).encode()
    counter = itertools.count(1)
    return lambda: b"%s%s.py.%d%s" % (head, nonce, next(counter), tail)


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile of ``values`` (unsorted is fine); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


def new_event_loop():  # type: ignore[no-untyped-def]
    """uvloop when installed (it is a freellm dependency), else the stdlib loop."""
    import asyncio

    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
