"""Multi-process serving: N worker processes sharing one listening port (SO_REUSEPORT).

The parent does no request work: it forks the workers, forwards SIGTERM/SIGINT to them, restarts a
worker that dies unexpectedly (with a back-off so a crash loop doesn't spin), and exits once every
worker has shut down gracefully. Each worker runs the full app on its own event loop; state that must
agree across workers goes through the store.

Metrics (docs/metrics.md): before the first fork the parent names a fresh, empty directory in
``PROMETHEUS_MULTIPROC_DIR``; every worker writes its values there (prometheus_client's multi-process
mode), a scrape of any worker sums them all, a dead worker's live gauges are dropped when it is
restarted, and the directory is removed once every worker has exited.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType

__all__ = ["serve_workers"]

log = logging.getLogger("freellm.workers")

_RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's multi-process directory (the name :mod:`freellm.metrics` reads; not imported from
there, which would import prometheus_client before the directory is set)."""


def serve_workers(
    count: int, run_worker: Callable[[int], None], *, grace_s: float, metrics_dir: Path | None = None
) -> int:
    """Run ``run_worker(index)`` in ``count`` forked processes until a signal stops them all.

    ``metrics_dir``: where the workers' metric files live (emptied now, removed at the end); None: a
    fresh directory under the system's temporary directory."""
    shared = _prepare_metrics_dir(metrics_dir)
    try:
        return _supervise(count, run_worker, grace_s=grace_s, metrics_dir=shared)
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(shared, ignore_errors=True)


def _prepare_metrics_dir(path: Path | None) -> Path:
    """An empty directory for the workers' metrics, named in the environment the workers inherit."""
    if "prometheus_client" in sys.modules:
        # Its value class was chosen at import, in-process: the workers' metrics could not be shared.
        raise RuntimeError(f"prometheus_client was imported before {MULTIPROC_ENV} was set for the workers")
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="freellm-metrics-"))
    else:
        shutil.rmtree(path, ignore_errors=True)  # a previous run's files would be summed in
        path.mkdir(parents=True)
    os.environ[MULTIPROC_ENV] = str(path)
    return path


def _worker_died(metrics_dir: Path, pid: int | None) -> None:
    """Drop a dead worker's live gauges (its in-flight count); its counters stay in the sums."""
    if pid is None:
        return
    from prometheus_client import multiprocess  # the directory is set: safe to import now

    multiprocess.mark_process_dead(pid, str(metrics_dir))  # type: ignore[no-untyped-call]


def _supervise(count: int, run_worker: Callable[[int], None], *, grace_s: float, metrics_dir: Path) -> int:
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
            _worker_died(metrics_dir, proc.pid)
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
