"""Multi-process serving: N worker processes sharing one listening port (SO_REUSEPORT).

The parent does no request work: it forks the workers, forwards SIGTERM/SIGINT to them, restarts a
worker that dies unexpectedly (with a back-off so a crash loop doesn't spin), and exits once every
worker has shut down gracefully. Each worker runs the full app on its own event loop; state that must
agree across workers goes through the store.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from types import FrameType

__all__ = ["serve_workers"]

log = logging.getLogger("freellm.workers")

_RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)


def serve_workers(count: int, run_worker: Callable[[int], None], *, grace_s: float) -> int:
    """Run ``run_worker(index)`` in ``count`` forked processes until a signal stops them all."""
    ctx = multiprocessing.get_context("fork")
    workers: dict[int, BaseProcess] = {}
    restarts: dict[int, int] = {}
    stopping = False

    def start(index: int) -> None:
        proc = ctx.Process(target=run_worker, args=(index,), name=f"freellm-worker-{index}", daemon=False)
        proc.start()
        workers[index] = proc

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for proc in workers.values():
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for index in range(count):
        start(index)
    deadline: float | None = None
    while workers:
        for index, proc in list(workers.items()):
            proc.join(0.2)
            if proc.is_alive():
                continue
            del workers[index]
            if stopping:
                continue
            attempt = restarts.get(index, 0)
            restarts[index] = attempt + 1
            delay = _RESTART_BACKOFF_S[min(attempt, len(_RESTART_BACKOFF_S) - 1)]
            log.error("worker %d exited with code %s; restarting in %.1fs", index, proc.exitcode, delay)
            time.sleep(delay)
            start(index)
        if stopping:
            deadline = deadline or time.monotonic() + grace_s + 5.0
            if time.monotonic() > deadline:
                for proc in workers.values():
                    proc.kill()
    return 0
