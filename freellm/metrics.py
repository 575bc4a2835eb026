"""Prometheus metrics for ``GET /metrics`` (docs/metrics.md).

One :class:`Metrics` per app, created at start-up and hung on the :class:`~freellm.server.state.Gateway`;
it owns its own :class:`~prometheus_client.CollectorRegistry` (never the process-global default), so
two apps in one process never clash. Every client request ends in ``log_turn``, which calls
:meth:`Metrics.observe_turn` once with the request-log row: a few cached label lookups and increments,
nothing on the per-chunk path.

Under ``freellm serve --workers N`` the parent points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory
before it forks (:mod:`freellm.server.workers`); each worker's values then live in that directory's
mmap files and a scrape, whichever worker answers it, renders the sum through a
:class:`~prometheus_client.multiprocess.MultiProcessCollector`. prometheus_client picks its value class
when it is first imported, so nothing on the import path of ``freellm.server.app`` may import this
module at the top: the app imports it inside its lifecycle, after the fork. A single process never
touches the multi-process machinery.

Labels never carry a key or message text: routes are ``provider/model`` labels (or ``cache``,
``fusion``, ``none``), error classes are the failure classifier's fixed names.
"""

from __future__ import annotations

import os
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import values as prometheus_values
from prometheus_client.multiprocess import MultiProcessCollector

from freellm.errors import TrailEntry
from freellm.store.base import RequestLogRow

__all__ = ["MULTIPROC_ENV", "Metrics", "create_metrics"]

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"

DURATION_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0)
"""Whole requests: a cache hit in milliseconds, a long answer in a minute (45 s: the fallback budget)."""
TTFT_BUCKETS: Final = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 45.0)

_CACHE_RESULTS: Final = {"HIT": "hit", "MISS": "miss", "BYPASS": "bypass"}
"""``X-FreeLLM-Cache`` → the ``result`` label."""


def _route_label(route: str | None) -> str:
    if route is None:
        return "none"
    if route == "fusion" or route.startswith("fusion("):  # fusion(a+b -> j): one label, not one per panel
        return "fusion"
    return route


class Metrics:
    """The gateway's metrics. ``multiprocess_dir``: the shared directory of a ``serve --workers``
    worker (None: a single process, values in memory)."""

    content_type: Final = CONTENT_TYPE_LATEST
    """Of :meth:`render`'s bytes (the scrape handler needs it without importing prometheus_client)."""

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        self.multiprocess = multiprocess_dir is not None
        self._registry = CollectorRegistry()
        owner: CollectorRegistry | None = self._registry
        if multiprocess_dir is not None:
            if not getattr(prometheus_values.ValueClass, "_multiprocess", False):
                raise RuntimeError(
                    f"prometheus_client was imported before {MULTIPROC_ENV} was set: "
                    "a worker's metrics would not be shared (import freellm.metrics after the fork)"
                )
            # The values live in the directory's files; the scrape reads every worker's through the
            # collector, so the metrics themselves are registered nowhere (else they would show twice).
            MultiProcessCollector(self._registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
            owner = None
        self._requests = Counter(
            "freellm_requests",
            "Client requests, by surface, answering route (provider/model, cache, fusion, none) and HTTP status.",
            ("surface", "route", "status"),
            registry=owner,
        )
        self._fallbacks = Counter(
            "freellm_fallback_attempts",
            "Failed upstream attempts (each one failed over or ended the request), by error class.",
            ("error_class",),
            registry=owner,
        )
        self._duration = Histogram(
            "freellm_request_duration_seconds",
            "Whole client requests, from arrival to the request-log row.",
            buckets=DURATION_BUCKETS,
            registry=owner,
        )
        self._ttft = Histogram(
            "freellm_ttft_seconds",
            "Time to the first token of the answering attempt (requests that have one).",
            buckets=TTFT_BUCKETS,
            registry=owner,
        )
        tokens = Counter(
            "freellm_tokens", "Tokens of client requests, in (prompt) and out (completion).", ("direction",), registry=owner
        )
        self._tokens_in = tokens.labels("in")
        self._tokens_out = tokens.labels("out")
        cache = Counter(
            "freellm_cache_requests",
            "Requests the response cache took part in, by X-FreeLLM-Cache result.",
            ("result",),
            registry=owner,
        )
        self._cache = {status: cache.labels(result) for status, result in _CACHE_RESULTS.items()}
        self._inflight = Gauge(
            "freellm_inflight_requests",
            "Client requests being answered now.",
            registry=owner,
            multiprocess_mode="livesum",
        )
        self._cooldowns = Gauge(
            "freellm_cooldowns_active",
            "Cooldowns active in the state store (computed at scrape time).",
            registry=owner,
            multiprocess_mode="mostrecent",  # the worker answering the scrape has just set it
        )
        # Label children by their values: a dict lookup per increment instead of labels()' validation.
        self._request_children: dict[tuple[str, str, int], Counter] = {}
        self._fallback_children: dict[str, Counter] = {}

    # -- per request -------------------------------------------------------------------------------------

    def inflight_inc(self) -> None:
        self._inflight.inc()

    def inflight_dec(self) -> None:
        self._inflight.dec()

    def observe_turn(self, row: RequestLogRow, trail: list[TrailEntry], cache_status: str | None) -> None:
        """Count one ended turn from its request-log row. A fusion member or judge call (its row has
        ``extra["fusion_role"]``) counts only its failed attempts: the client's request is the fusion
        turn's own row."""
        for entry in trail:
            child = self._fallback_children.get(entry.error_class)
            if child is None:
                child = self._fallback_children[entry.error_class] = self._fallbacks.labels(entry.error_class)
            child.inc()
        if "fusion_role" in row.extra:
            return
        key = (row.surface, _route_label(row.route), row.status)
        requests = self._request_children.get(key)
        if requests is None:
            requests = self._request_children[key] = self._requests.labels(key[0], key[1], str(key[2]))
        requests.inc()
        self._duration.observe(row.latency_ms / 1000)
        if row.ttfb_ms is not None:
            self._ttft.observe(row.ttfb_ms / 1000)
        if row.tokens_in:
            self._tokens_in.inc(row.tokens_in)
        if row.tokens_out:
            self._tokens_out.inc(row.tokens_out)
        if cache_status is not None:
            cache = self._cache.get(cache_status)
            if cache is not None:
                cache.inc()

    # -- per scrape -------------------------------------------------------------------------------------

    def render(self, cooldowns_active: int) -> bytes:
        """The exposition (:attr:`content_type`), every worker's values summed in multi-process mode."""
        self._cooldowns.set(cooldowns_active)
        return generate_latest(self._registry)


def create_metrics(*, worker: bool) -> Metrics:
    """The app's metrics: a ``serve --workers`` worker shares the directory its parent set up."""
    if not worker:
        return Metrics()
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        raise RuntimeError(f"a serve --workers worker needs {MULTIPROC_ENV} (set by the parent before it forks)")
    return Metrics(multiprocess_dir=path)
