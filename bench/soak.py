"""Soak: mixed streaming and non-stream traffic through freellm with a failing provider; RSS over time.

freellm routes ``auto`` through the chain ``flaky/model-x`` → ``steady/model-x`` (two virtual providers
of one simulator). The simulator is scripted (``POST /_sim/script``, ``times: null``, ``match`` on a
marker in the prompt) so that the share ``--soak-fail-rate`` of requests fails on ``flaky`` in one of
four ways, in rotation:

* ``status500``: HTTP 500 → freellm fails over to ``steady`` invisibly;
* ``status429``: HTTP 429 with Retry-After → fails over;
* ``cut0``: the connection is cut before the first content chunk → fails over;
* ``cut5``: the connection is cut after 5 content chunks → a stream has already committed, so the client
  gets freellm's in-band ``stream_error`` frame and ``[DONE]``; a non-stream request fails over.

Cooldowns for a local upstream (``cooldown_local_s``) and the model bench are set to 0 so that every
marked request really exercises the failure path instead of being routed around it.

Every ``--soak-interval`` seconds the RSS of the freellm process (and any children) is written to a
CSV with the request counts so far. The summary gives start/end/max RSS after warm-up, the slope, and a
verdict: flat when the RSS at the end is within max(5 MiB, 5 %) of the RSS after warm-up.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench import report
from bench.loadgen import REPO
from bench.procs import choose_placement, free_port, raise_priority, rss_bytes
from bench.runner import base_versions, machine_facts, start_sim
from bench.stats import new_event_loop
from bench.targets import CLIENT_KEY, Context, freellm_config, launch_freellm

MIB = 1024 * 1024
FAILURES = {
    "status500": {"status": 500, "error_message": "soak: scripted failure"},
    "status429": {"status": 429, "retry_after": 1},
    "cut0": {"cut_after": 0},
    "cut5": {"cut_after": 5},
}


@dataclass
class SoakOptions:
    duration: float = 600.0
    interval: float = 5.0
    concurrency: int = 16
    fail_rate: float = 0.2
    chunks: int = 20
    no_pin: bool = False
    docs: str = "auto"
    command: str = "python -m bench soak"
    results_dir: Path = REPO / "bench" / "results"


@dataclass
class Counters:
    requests: int = 0
    ok: int = 0
    failed_over: int = 0
    http_errors: int = 0
    stream_errors: int = 0
    transport_errors: int = 0
    marked: int = 0
    by_status: dict[int, int] = field(default_factory=dict)


def _body(i: int, fail_every: int) -> tuple[bytes, bool]:
    stream = i % 2 == 0
    text = f"soak request {i}"
    if fail_every and i % fail_every == 0:
        # Consecutive marked requests alternate stream/non-stream (when fail_every is odd), so step the
        # kind every second one: each kind then meets both modes.
        kinds = list(FAILURES)
        text += f" [soak-fail-{kinds[(i // fail_every // 2) % len(kinds)]}]"
    body = {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": text}]}
    return json.dumps(body).encode(), stream


async def _drive(url: str, opts: SoakOptions, counters: Counters, deadline: float) -> None:
    fail_every = round(1 / opts.fail_rate) if opts.fail_rate > 0 else 0
    headers = {"Authorization": f"Bearer {CLIENT_KEY}", "Content-Type": "application/json"}
    seq = iter(range(1, 1 << 62))
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=opts.concurrency), timeout=timeout
    ) as s:

        async def worker() -> None:
            while time.monotonic() < deadline:
                i = next(seq)
                body, stream = _body(i, fail_every)
                if b"[soak-fail-" in body:
                    counters.marked += 1
                try:
                    async with s.post(url, data=body, headers=headers) as resp:
                        data = await resp.read()
                        counters.requests += 1
                        counters.by_status[resp.status] = counters.by_status.get(resp.status, 0) + 1
                        if resp.headers.get("X-Fallback-Attempts"):
                            counters.failed_over += 1
                        if resp.status != 200:
                            counters.http_errors += 1
                        elif stream and (b'"error"' in data or not data.rstrip().endswith(b"data: [DONE]")):
                            counters.stream_errors += 1
                        else:
                            counters.ok += 1
                except (TimeoutError, aiohttp.ClientError):
                    counters.requests += 1
                    counters.transport_errors += 1

        await asyncio.gather(*(worker() for _ in range(opts.concurrency)))


async def _sample(
    pid: int,
    opts: SoakOptions,
    counters: Counters,
    start: float,
    deadline: float,
    data_dir: Path,
    writer: csv.DictWriter,  # type: ignore[type-arg]
    flush: Callable[[], None],
    rows: list[dict],
) -> None:
    next_at = start
    last_print = start
    while True:
        now = time.monotonic()
        rss = rss_bytes(pid)
        disk = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file()) if data_dir.exists() else 0
        row = {
            "elapsed_s": round(now - start, 1),
            "rss_mib": round(rss / MIB, 2),
            "requests": counters.requests,
            "ok": counters.ok,
            "failed_over": counters.failed_over,
            "http_errors": counters.http_errors,
            "stream_errors": counters.stream_errors,
            "transport_errors": counters.transport_errors,
            "data_dir_mib": round(disk / MIB, 2),
        }
        rows.append(row)
        writer.writerow(row)
        flush()
        if now - last_print >= 60 or not rows[:-1]:
            last_print = now
            print(
                f"  t={row['elapsed_s']:>6.0f}s  RSS {row['rss_mib']:7.1f} MiB  requests {row['requests']:>8}  "
                f"failed over {row['failed_over']:>7}  client errors {row['http_errors'] + row['stream_errors'] + row['transport_errors']}",
                flush=True,
            )
        if now >= deadline:
            return
        next_at += opts.interval
        await asyncio.sleep(max(0.0, min(next_at, deadline) - time.monotonic()))


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope (y per x)."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    den = sum((p[0] - mx) ** 2 for p in points)
    return None if den == 0 else sum((p[0] - mx) * (p[1] - my) for p in points) / den


def summarize(rows: list[dict], duration: float) -> dict:
    if not rows:
        raise RuntimeError("the soak recorded no RSS sample")
    warm = min(60.0, duration * 0.1)
    after = [r for r in rows if r["elapsed_s"] >= warm] or rows
    rss = [r["rss_mib"] for r in after]
    start, end = rss[0], rss[-1]
    slope_s = _slope([(r["elapsed_s"], r["rss_mib"]) for r in after])
    half = [
        r
        for r in after
        if r["elapsed_s"] >= after[0]["elapsed_s"] + (after[-1]["elapsed_s"] - after[0]["elapsed_s"]) / 2
    ]
    slope_half = _slope([(r["elapsed_s"], r["rss_mib"]) for r in half])
    tolerance = max(5.0, 0.05 * start)
    last = rows[-1]
    return {
        "warmup_s": warm,
        "rss_first_mib": rows[0]["rss_mib"],
        "rss_start_mib": start,
        "rss_end_mib": end,
        "rss_max_mib": max(rss),
        "rss_min_mib": min(rss),
        "growth_mib": round(end - start, 2),
        "slope_mib_per_min": None if slope_s is None else round(slope_s * 60, 3),
        "slope_second_half_mib_per_min": None if slope_half is None else round(slope_half * 60, 3),
        "tolerance_mib": round(tolerance, 1),
        "flat": (end - start) <= tolerance,
        "requests": last["requests"],
        "ok": last["ok"],
        "failed_over": last["failed_over"],
        "http_errors": last["http_errors"],
        "stream_errors": last["stream_errors"],
        "transport_errors": last["transport_errors"],
        "data_dir_mib": last["data_dir_mib"],
        "req_per_s": round(last["requests"] / max(last["elapsed_s"], 1e-9), 1),
    }


def soak_markdown(meta: dict, s: dict, csv_name: str) -> str:
    verdict = "**flat**" if s["flat"] else "**growing**"
    slope = report.DASH if s["slope_mib_per_min"] is None else f"{s['slope_mib_per_min']:+.3f} MiB/min"
    m = meta["machine"]
    return (
        "\n".join(
            [
                f"Run {meta['started_at']} with `{meta['command']}`: {meta['duration_s']:g} s, {meta['concurrency']} connections, "
                f"half streams of {meta['chunks']} chunks, {meta['fail_rate'] * 100:g}% of requests failing on `flaky` "
                f"(500 / 429 / cut before the first chunk / cut after 5 chunks, in rotation). RSS sampled every "
                f"{meta['interval_s']:g} s into `bench/results/{csv_name}`.",
                f"Machine: {m['nproc']} cores ({m['cpu']}); versions: "
                + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
                + f"; placement: {meta['placement']}.",
                "",
                "| requests | req/s | failed over | client errors (HTTP / in-band / transport) | RSS at start | after warm-up | end | max | growth | slope | verdict |",
                "|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|---|",
                f"| {s['requests']:,} | {s['req_per_s']:,.0f} | {s['failed_over']:,} | {s['http_errors']} / {s['stream_errors']} / "
                f"{s['transport_errors']} | {s['rss_first_mib']:.1f} MiB | {s['rss_start_mib']:.1f} MiB | {s['rss_end_mib']:.1f} MiB | "
                f"{s['rss_max_mib']:.1f} MiB | {s['growth_mib']:+.1f} MiB | {slope} | {verdict} "
                f"(tolerance {s['tolerance_mib']:g} MiB) |",
                "",
                f"The data directory (SQLite) held {s['data_dir_mib']:.1f} MiB at the end. In-band errors are the "
                "expected `cut5` streams (a cut after the commit point cannot be failed over).",
            ]
        )
        + "\n"
    )


def run_soak(opts: SoakOptions) -> int:
    started = time.time()
    placement = choose_placement(opts.no_pin)
    priority = raise_priority(-10)
    if placement.pinned and placement.load is not None:
        os.sched_setaffinity(0, placement.load)
    work = Path(tempfile.mkdtemp(prefix="freellm-soak-"))
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    csv_path = opts.results_dir / f"soak-{stamp}.csv"
    print(
        f"soak: {opts.duration:g} s through freellm, RSS every {opts.interval:g} s → {csv_path}", flush=True
    )
    print(f"placement: {placement.describe()}", flush=True)
    sim_proc = gw = None
    rows: list[dict] = []
    try:
        sim_proc, sim_base = start_sim(work, placement, opts.chunks, 0.0)
        from freellm.sim.control import SimControl

        ctl = SimControl(sim_base)
        for kind, scenario in FAILURES.items():
            ctl.script("flaky", scenario, match=f"[soak-fail-{kind}]", times=None)
        ctx = Context(sim_base, sim_proc, work, placement, 1, install=False)
        port = free_port()
        data_dir = work / "freellm-data"
        cfg = freellm_config(
            ctx,
            port,
            data_dir,
            extra={
                "providers": [
                    {
                        "name": n,
                        "kind": "openai",
                        "base_url": f"{sim_base}/{n}/v1",
                        "keys": [f"sk-{n}"],
                        "models": [{"id": "model-x"}],
                    }
                    for n in ("flaky", "steady")
                ],
                "chain": ["flaky/model-x", "steady/model-x"],
                "fallback": {"cooldown_local_s": 0, "model_bench_failures": 0},
            },
        )
        gw = launch_freellm(ctx, "freellm-soak", cfg, port)
        gw.wait_ready(f"http://127.0.0.1:{port}/health", 60)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        counters = Counters()
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(
                f,
                fieldnames=[
                    "elapsed_s",
                    "rss_mib",
                    "requests",
                    "ok",
                    "failed_over",
                    "http_errors",
                    "stream_errors",
                    "transport_errors",
                    "data_dir_mib",
                ],
            )
            writer.writeheader()

            async def main() -> None:
                start = time.monotonic()
                deadline = start + opts.duration
                await asyncio.gather(
                    _drive(url, opts, counters, deadline),
                    _sample(gw.pid, opts, counters, start, deadline, data_dir, writer, f.flush, rows),
                )

            loop = new_event_loop()
            try:
                loop.run_until_complete(main())
            finally:
                loop.close()
        if not gw.alive():
            raise RuntimeError(f"freellm exited during the soak:\n{gw.log_tail()}")
    finally:
        if gw is not None:
            gw.stop()
        if sim_proc is not None:
            sim_proc.stop()
        logs = opts.results_dir / "logs-soak"
        shutil.rmtree(logs, ignore_errors=True)
        shutil.copytree(work / "logs", logs, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(rows, opts.duration)
    meta = {
        "command": opts.command,
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
        "duration_s": opts.duration,
        "interval_s": opts.interval,
        "concurrency": opts.concurrency,
        "fail_rate": opts.fail_rate,
        "chunks": opts.chunks,
        "placement": placement.describe(),
        "priority": priority,
        "machine": machine_facts(),
        "versions": base_versions(),
    }
    md = soak_markdown(meta, summary, csv_path.name)
    (opts.results_dir / f"soak-{stamp}.json").write_text(
        json.dumps({"meta": meta, "summary": summary}, indent=2) + "\n"
    )
    (opts.results_dir / f"soak-{stamp}.md").write_text(md)
    print("\n" + md)
    if opts.docs == "always" or (opts.docs == "auto" and opts.duration >= 600):
        path = REPO / "docs" / "benchmarks.md"
        report.update_docs(path, report.SOAK_BEGIN, report.SOAK_END, md)
        print(f"updated {path}")
    return 0 if summary["flat"] else 1
