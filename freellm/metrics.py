"""Prometheus metrics for ``GET /metrics`` (docs/metrics.md).

One :class:`Metrics` per app, created at start-up and hung on the :class:`~freellm.server.state.Gateway`;
it owns its own :class:`~prometheus_client.CollectorRegistry` (never the process-global default), so
two apps in one process never clash. Every client request ends in ``log_turn``, which calls
:meth:`Metrics.observe_turn` once with the request-log row: in a single process a few dictionary
increments whose metric families are built at scrape time (:class:`_Tally`), nothing on the per-chunk
path.

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
from bisect import bisect_left
from collections.abc import Iterator
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
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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


_REQUESTS_DOC: Final = (
    "Client requests, by surface, answering route (provider/model, cache, fusion, none) and HTTP status."
)
_FALLBACKS_DOC: Final = (
    "Failed upstream attempts (each one failed over or ended the request), by error class."
)
_DURATION_DOC: Final = "Whole client requests, from arrival to the request-log row."
_TTFT_DOC: Final = "Time to the first token of the answering attempt (requests that have one)."
_TOKENS_DOC: Final = "Tokens of client requests, in (prompt) and out (completion)."
_CACHE_DOC: Final = "Requests the response cache took part in, by X-FreeLLM-Cache result."
_INFLIGHT_DOC: Final = "Client requests being answered now."
_COOLDOWNS_DOC: Final = "Cooldowns active in the state store (computed at scrape time)."


class _Buckets:
    """One histogram's counts: per bucket (not cumulative), the observation count and sum."""

    __slots__ = ("bounds", "counts", "n", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # le: a value equal to a bound is in it
        self.total += value
        self.n += 1

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        running = 0
        cumulative: list[tuple[str, float]] = []
        for bound, count in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            cumulative.append((bound, running))
        return HistogramMetricFamily(name, doc, buckets=cumulative, sum_value=self.total)


class _Tally(Collector):
    """A single process's values: plain arithmetic per request, metric families built at scrape time.

    prometheus_client's own metric objects take a lock and several calls per increment — a third of
    the metrics' cost per request on the non-stream hot path (issue 17); one process needs neither."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = {}
        self.fallbacks: dict[str, int] = {}
        self.duration = _Buckets(DURATION_BUCKETS)
        self.ttft = _Buckets(TTFT_BUCKETS)
        self.tokens = {"in": 0, "out": 0}
        self.cache = dict.fromkeys(_CACHE_RESULTS, 0)
        self.inflight = 0
        self.cooldowns = 0

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "freellm_requests", _REQUESTS_DOC, labels=("surface", "route", "status")
        )
        for (surface, route, status), n in self.requests.items():
            requests.add_metric((surface, route, str(status)), n)
        yield requests
        fallbacks = CounterMetricFamily("freellm_fallback_attempts", _FALLBACKS_DOC, labels=("error_class",))
        for error_class, n in self.fallbacks.items():
            fallbacks.add_metric((error_class,), n)
        yield fallbacks
        yield self.duration.family("freellm_request_duration_seconds", _DURATION_DOC)
        yield self.ttft.family("freellm_ttft_seconds", _TTFT_DOC)
        tokens = CounterMetricFamily("freellm_tokens", _TOKENS_DOC, labels=("direction",))
        for direction, n in self.tokens.items():
            tokens.add_metric((direction,), n)
        yield tokens
        cache = CounterMetricFamily("freellm_cache_requests", _CACHE_DOC, labels=("result",))
        for cache_status, n in self.cache.items():
            cache.add_metric((_CACHE_RESULTS[cache_status],), n)
        yield cache
        yield GaugeMetricFamily("freellm_inflight_requests", _INFLIGHT_DOC, value=self.inflight)
        yield GaugeMetricFamily("freellm_cooldowns_active", _COOLDOWNS_DOC, value=self.cooldowns)


class _Shared:
    """A ``serve --workers`` worker's values, in prometheus_client's multi-process files (the scrape,
    whichever worker answers it, sums every worker's)."""

    def __init__(self) -> None:
        self.requests = Counter(
            "freellm_requests", _REQUESTS_DOC, ("surface", "route", "status"), registry=None
        )
        self.fallbacks = Counter("freellm_fallback_attempts", _FALLBACKS_DOC, ("error_class",), registry=None)
        self.duration = Histogram(
            "freellm_request_duration_seconds", _DURATION_DOC, buckets=DURATION_BUCKETS, registry=None
        )
        self.ttft = Histogram("freellm_ttft_seconds", _TTFT_DOC, buckets=TTFT_BUCKETS, registry=None)
        tokens = Counter("freellm_tokens", _TOKENS_DOC, ("direction",), registry=None)
        self.tokens = {"in": tokens.labels("in"), "out": tokens.labels("out")}
        cache = Counter("freellm_cache_requests", _CACHE_DOC, ("result",), registry=None)
        self.cache = {status: cache.labels(result) for status, result in _CACHE_RESULTS.items()}
        self.inflight = Gauge(
            "freellm_inflight_requests", _INFLIGHT_DOC, registry=None, multiprocess_mode="livesum"
        )
        # The worker answering the scrape has just set it.
        self.cooldowns = Gauge(
            "freellm_cooldowns_active", _COOLDOWNS_DOC, registry=None, multiprocess_mode="mostrecent"
        )
        # Label children by their values: a dict lookup per increment instead of labels()' validation.
        self.request_children: dict[tuple[str, str, int], Counter] = {}
        self.fallback_children: dict[str, Counter] = {}


class Metrics:
    """The gateway's metrics. ``multiprocess_dir``: the shared directory of a ``serve --workers``
    worker (None: a single process, values in memory)."""

    content_type: Final = CONTENT_TYPE_LATEST
    """Of :meth:`render`'s bytes (the scrape handler needs it without importing prometheus_client)."""

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        self.multiprocess = multiprocess_dir is not None
        self._registry = CollectorRegistry()
        self._tally: _Tally | None = None
        self._shared: _Shared | None = None
        if multiprocess_dir is None:
            self._tally = _Tally()
            self._registry.register(self._tally)
            return
        if not getattr(prometheus_values.ValueClass, "_multiprocess", False):
            raise RuntimeError(
                f"prometheus_client was imported before {MULTIPROC_ENV} was set: "
                "a worker's metrics would not be shared (import freellm.metrics after the fork)"
            )
        # The values live in the directory's files; the scrape reads every worker's through the
        # collector, so the metrics themselves are registered nowhere (else they would show twice).
        MultiProcessCollector(self._registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
        self._shared = _Shared()

    # -- per request -------------------------------------------------------------------------------------

    def inflight_inc(self) -> None:
        if self._tally is not None:
            self._tally.inflight += 1
        elif self._shared is not None:
            self._shared.inflight.inc()

    def inflight_dec(self) -> None:
        if self._tally is not None:
            self._tally.inflight -= 1
        elif self._shared is not None:
            self._shared.inflight.dec()

    def observe_turn(self, row: RequestLogRow, trail: list[TrailEntry], cache_status: str | None) -> None:
        """Count one ended turn from its request-log row. A fusion member or judge call (its row has
        ``extra["fusion_role"]``) counts only its failed attempts: the client's request is the fusion
        turn's own row."""
        tally = self._tally
        if tally is None:
            self._observe_shared(row, trail, cache_status)
            return
        if trail:
            fallbacks = tally.fallbacks
            for entry in trail:
                fallbacks[entry.error_class] = fallbacks.get(entry.error_class, 0) + 1
        if "fusion_role" in row.extra:
            return
        key = (row.surface, _route_label(row.route), row.status)
        requests = tally.requests
        requests[key] = requests.get(key, 0) + 1
        tally.duration.observe(row.latency_ms / 1000)
        if row.ttfb_ms is not None:
            tally.ttft.observe(row.ttfb_ms / 1000)
        tokens = tally.tokens
        tokens["in"] += row.tokens_in
        tokens["out"] += row.tokens_out
        if cache_status in tally.cache:
            tally.cache[cache_status] += 1

    def _observe_shared(self, row: RequestLogRow, trail: list[TrailEntry], cache_status: str | None) -> None:
        shared = self._shared
        assert shared is not None
        for entry in trail:
            child = shared.fallback_children.get(entry.error_class)
            if child is None:
                child = shared.fallback_children[entry.error_class] = shared.fallbacks.labels(
                    entry.error_class
                )
            child.inc()
        if "fusion_role" in row.extra:
            return
        key = (row.surface, _route_label(row.route), row.status)
        requests = shared.request_children.get(key)
        if requests is None:
            requests = shared.request_children[key] = shared.requests.labels(key[0], key[1], str(key[2]))
        requests.inc()
        shared.duration.observe(row.latency_ms / 1000)
        if row.ttfb_ms is not None:
            shared.ttft.observe(row.ttfb_ms / 1000)
        if row.tokens_in:
            shared.tokens["in"].inc(row.tokens_in)
        if row.tokens_out:
            shared.tokens["out"].inc(row.tokens_out)
        if cache_status is not None:
            cache = shared.cache.get(cache_status)
            if cache is not None:
                cache.inc()

    # -- per scrape -------------------------------------------------------------------------------------

    def render(self, cooldowns_active: int) -> bytes:
        """The exposition (:attr:`content_type`), every worker's values summed in multi-process mode."""
        if self._tally is not None:
            self._tally.cooldowns = cooldowns_active
        elif self._shared is not None:
            self._shared.cooldowns.set(cooldowns_active)
        return generate_latest(self._registry)


def create_metrics(*, worker: bool) -> Metrics:
    """The app's metrics: a ``serve --workers`` worker shares the directory its parent set up."""
    if not worker:
        return Metrics()
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        raise RuntimeError(
            f"a serve --workers worker needs {MULTIPROC_ENV} (set by the parent before it forks)"
        )
    return Metrics(multiprocess_dir=path)
