"""What counting one request for ``/metrics`` costs: ``python -m bench.metrics_cost``.

Each iteration does what the gateway does per client request with metrics on: the in-flight gauge up
and down, and :meth:`Metrics.observe_turn` for a finished row (a streamed answer with a TTFT, tokens
in and out, a cache result) — once with no failed attempt and once with one failover. Printed in
microseconds per request, for a single process and for a ``serve --workers`` worker (multi-process
mode, whose values are memory-mapped files; measured in a child process, because prometheus_client
picks its value class when it is first imported).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

ITERATIONS = 50_000
_CHILD_FLAG = "--multiprocess-child"


def _cost(*, multiprocess_dir: str | None) -> tuple[float, float]:
    from freellm.errors import TrailEntry
    from freellm.metrics import Metrics
    from freellm.store.base import RequestLogRow

    metrics = Metrics(multiprocess_dir=multiprocess_dir)
    row = RequestLogRow(
        request_id="req_bench",
        ts=time.time(),
        surface="chat",
        requested_model="auto",
        route="bench/model-x",
        status=200,
        stream=True,
        attempts=1,
        latency_ms=42,
        ttfb_ms=7,
        tokens_in=120,
        tokens_out=48,
    )
    failover = [TrailEntry(provider="other", model="model-y", key_n=1, error_class="rate_limited")]
    results = []
    for trail in ([], failover):
        started = time.perf_counter()
        for _ in range(ITERATIONS):
            metrics.inflight_inc()
            metrics.observe_turn(row, trail, "MISS")
            metrics.inflight_dec()
        results.append((time.perf_counter() - started) / ITERATIONS * 1e6)
    return results[0], results[1]


def _report(mode: str, costs: tuple[float, float]) -> None:
    print(f"{mode:14} {costs[0]:5.1f} µs per request, {costs[1]:5.1f} µs with one failed attempt")


def main() -> None:
    if _CHILD_FLAG in sys.argv:
        _report("multi-process", _cost(multiprocess_dir=os.environ["PROMETHEUS_MULTIPROC_DIR"]))
        return
    _report("single process", _cost(multiprocess_dir=None))
    with tempfile.TemporaryDirectory(prefix="freellm-metrics-bench-") as directory:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": directory}
        subprocess.run([sys.executable, "-m", "bench.metrics_cost", _CHILD_FLAG], env=env, check=True)


if __name__ == "__main__":
    main()
