"""Small helpers shared by the Python-side measurers (TTFB probe, fallback load generator)."""

from __future__ import annotations

import math
from collections.abc import Sequence


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
