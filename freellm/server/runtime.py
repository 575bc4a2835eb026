"""Process-level tuning of a serving process: the event loop and the garbage collector.

A gateway allocates many short-lived objects per request (parsed JSON, chunks, headers) and almost no
reference cycles. CPython's default young-generation threshold (700 allocations) then runs a collection
every few requests, which measured ~8% of a worker's CPU at full load. Freezing the objects that exist
after start-up (modules, settings, catalog) and raising the threshold makes collections rare and
cheap; refcounting still frees the per-request garbage at once, so memory stays flat (see the soak in
docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import gc

__all__ = ["new_event_loop", "tune_gc"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when available (every platform but Windows), else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency everywhere but Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def tune_gc(gen0_threshold: int) -> None:
    """Freeze what start-up created and collect the young generation every ``gen0_threshold``
    allocations (0 leaves CPython's defaults)."""
    if gen0_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
