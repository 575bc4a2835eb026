"""The soak's verdict: is every sampled series flat within its stated bound?

Each series is compared between the start and the end of the run after warm-up: the median of the first
10 % of samples against the median of the last 10 % (at least three samples each), so one sample taken
while a burst of streams was in flight does not decide it. The bounds:

* **RSS**: growth ≤ max(5 MiB, 5 % of the start);
* **open file descriptors**: growth ≤ max(8, 10 %) — sockets come and go with the load, a leak grows;
* **asyncio tasks**: growth ≤ max(concurrency, 10 %) — each in-flight request owns a task or two;
* **store**: the data directory grows with the request log and the stored responses by design, so the
  bound is on its *rate*: bytes per request over the second half ≤ 1.5 times the first half's (linear in
  the requests served, not accelerating); and **leases held** once the load has stopped must be 0.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench import report

__all__ = ["SERIES", "soak_markdown", "summarize"]

SERIES = ("rss_mib", "open_fds", "asyncio_tasks")


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope (y per x)."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    den = sum((p[0] - mx) ** 2 for p in points)
    return None if den == 0 else sum((p[0] - mx) * (p[1] - my) for p in points) / den


def _bound(name: str, start: float, concurrency: int) -> float:
    if name == "rss_mib":
        return max(5.0, 0.05 * start)
    if name == "open_fds":
        return max(8.0, 0.10 * start)
    return max(float(concurrency), 0.10 * start)


def _series(after: list[dict[str, Any]], name: str, concurrency: int) -> dict[str, Any]:
    values = [float(r[name]) for r in after if r.get(name) is not None]
    if not values:
        return {"flat": False, "missing": True}
    k = max(3, len(values) // 10)
    start, end = statistics.median(values[:k]), statistics.median(values[-k:])
    bound = _bound(name, start, concurrency)
    slope = _slope([(r["elapsed_s"], float(r[name])) for r in after if r.get(name) is not None])
    return {
        "start": round(start, 2),
        "end": round(end, 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        "growth": round(end - start, 2),
        "bound": round(bound, 2),
        "slope_per_min": None if slope is None else round(slope * 60, 4),
        "flat": end - start <= bound,
    }


def _store(after: list[dict[str, Any]]) -> dict[str, Any]:
    first, last = after[0], after[-1]
    mid = min(after, key=lambda r: abs(r["requests"] - (first["requests"] + last["requests"]) / 2))

    def rate(a: dict[str, Any], b: dict[str, Any]) -> float | None:
        served = b["requests"] - a["requests"]
        return None if served <= 0 else (b["data_dir_mib"] - a["data_dir_mib"]) * 1024 * 1024 / served

    r1, r2 = rate(first, mid), rate(mid, last)
    linear = r1 is None or r2 is None or r2 <= 1.5 * max(r1, 1.0)
    return {
        "start_mib": first["data_dir_mib"],
        "end_mib": last["data_dir_mib"],
        "bytes_per_request_first_half": None if r1 is None else round(r1),
        "bytes_per_request_second_half": None if r2 is None else round(r2),
        "flat": linear,
    }


def summarize(
    rows: list[dict[str, Any]], duration: float, concurrency: int, drained: dict[str, Any]
) -> dict[str, Any]:
    """Figures and the verdict; ``drained`` is the sample taken once the load stopped."""
    if not rows:
        raise RuntimeError("the soak recorded no sample")
    warm = min(60.0, duration * 0.1)
    after = [r for r in rows if r["elapsed_s"] >= warm] or rows
    series = {name: _series(after, name, concurrency) for name in SERIES}
    store = _store(after)
    held = drained.get("leases")
    last = rows[-1]
    flat = all(s["flat"] for s in series.values()) and store["flat"] and held == 0
    return {
        "warmup_s": warm,
        "rss_first_mib": rows[0]["rss_mib"],
        "series": series,
        "store": store,
        "drained": drained,
        "flat": flat,
        "requests": last["requests"],
        "ok": last["ok"],
        "failed_over": last["failed_over"],
        "hung_up": last["hung_up"],
        "http_errors": last["http_errors"],
        "stream_errors": last["stream_errors"],
        "transport_errors": last["transport_errors"],
        "req_per_s": round(last["requests"] / max(last["elapsed_s"], 1e-9), 1),
    }


_LABELS = {"rss_mib": ("RSS", "MiB"), "open_fds": ("open fds", ""), "asyncio_tasks": ("asyncio tasks", "")}


def _fmt(v: float, unit: str) -> str:
    text = f"{v:,.1f}" if unit else f"{v:,.0f}"
    return f"{text} {unit}".rstrip()


def soak_markdown(meta: dict[str, Any], s: dict[str, Any], csv_name: str) -> str:
    """The block written between the soak markers of docs/benchmarks.md."""
    m = meta["machine"]
    verdict = "**flat**" if s["flat"] else "**growing**"
    lines = [
        f"Run {meta['started_at']} with `{meta['command']}`: {meta['duration_s']:g} s, {meta['concurrency']} "
        f"connections; chat completions and (every fourth request) stored Responses, half of them streams of "
        f"{meta['chunks']} chunks; {meta['fail_rate'] * 100:g}% of requests failing on `flaky` (500 / 429 / cut "
        f"before the first chunk / cut after 5 chunks, in rotation); {meta['hangup_rate'] * 100:g}% of the "
        f"streams dropped by their client after the first frame. Sampled every {meta['interval_s']:g} s into "
        f"`bench/results/{csv_name}` (RSS and fds from `/proc/<pid>`, tasks and leases from `GET /admin/runtime`).",
        f"Machine: {m['nproc']} cores ({m['cpu']}); versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + f"; placement: {meta['placement']}.",
        "",
        "| requests | req/s | failed over | hung up by the client | client errors (HTTP / in-band / transport) |",
        "|--:|--:|--:|--:|---|",
        f"| {s['requests']:,} | {s['req_per_s']:,.0f} | {s['failed_over']:,} | {s['hung_up']:,} | "
        f"{s['http_errors']} / {s['stream_errors']} / {s['transport_errors']} |",
        "",
        f"| series (after {s['warmup_s']:g} s warm-up) | start | end | min | max | growth | slope | bound | verdict |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for name, (label, unit) in _LABELS.items():
        x = s["series"][name]
        if x.get("missing"):
            lines.append(f"| {label} | {report.DASH} | | | | | | | **missing** |")
            continue
        slope = report.DASH if x["slope_per_min"] is None else f"{x['slope_per_min']:+.3f}/min"
        lines.append(
            f"| {label} | {_fmt(x['start'], unit)} | {_fmt(x['end'], unit)} | {_fmt(x['min'], unit)} | "
            f"{_fmt(x['max'], unit)} | {x['growth']:+,.1f} | {slope} | ≤ {_fmt(x['bound'], unit)} | "
            f"{'flat' if x['flat'] else '**growing**'} |"
        )
    st, d = s["store"], s["drained"]
    lines.append(
        f"| store (data dir) | {st['start_mib']:.1f} MiB | {st['end_mib']:.1f} MiB | | | "
        f"{st['end_mib'] - st['start_mib']:+.1f} MiB | {st['bytes_per_request_first_half']} → "
        f"{st['bytes_per_request_second_half']} B/request | second half ≤ 1.5x first | "
        f"{'linear' if st['flat'] else '**accelerating**'} |"
    )
    lines += [
        "",
        f"Once the load stopped: {d.get('leases')} leases held, {d.get('checked_out')} upstream connections "
        f"checked out, {d.get('turns_running')} turns running, {d.get('asyncio_tasks')} asyncio tasks "
        f"(read within {d.get('after_s')} s). Verdict: {verdict}. In-band errors are the expected `cut5` "
        "streams (a cut after the commit point cannot be failed over).",
    ]
    return "\n".join(lines) + "\n"
