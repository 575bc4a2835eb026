"""Soak: mixed traffic through freellm with a failing provider and clients that hang up; RSS, open file
descriptors, asyncio tasks and store size over time.

freellm routes ``auto`` through the chain ``flaky/model-x`` → ``steady/model-x`` (two virtual providers
of one simulator). The traffic (:mod:`bench.soak_load`) is chat completions and stored Responses,
streamed and not; the simulator is scripted (``POST /_sim/script``, ``times: null``, ``match`` on a
marker in the prompt) so that the share ``--soak-fail-rate`` of requests fails on ``flaky`` in one of
four ways, in rotation:

* ``status500``: HTTP 500 → freellm fails over to ``steady`` invisibly;
* ``status429``: HTTP 429 with Retry-After → fails over;
* ``cut0``: the connection is cut before the first content chunk → fails over;
* ``cut5``: the connection is cut after 5 content chunks → a stream has already committed, so the client
  gets freellm's in-band error and terminator; a non-stream request fails over.

and the share ``--soak-hangup-rate`` of the streams is dropped by its client after the first frame.

Cooldowns for a local upstream (``cooldown_local_s``) and the model bench are set to 0 so that every
marked request really exercises the failure path instead of being routed around it.

Every ``--soak-interval`` seconds a CSV row records the freellm process's RSS and open fds (from
``/proc``), its asyncio tasks, turns, leases and upstream pool (``GET /admin/runtime``, admin key), the
data directory's size and the request counts. Once the load stops, one more reading checks that no
lease or upstream connection is left. :mod:`bench.soak_verdict` states the bound of every series and
gives the verdict.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench import report
from bench.loadgen import REPO
from bench.procs import choose_placement, free_port, raise_priority, rss_bytes
from bench.runner import base_versions, machine_facts, start_sim
from bench.soak_load import FAILURES, HANGUP_MARK, HANGUP_SCENARIO, Counters, LoadMix, drive
from bench.soak_verdict import soak_markdown, summarize
from bench.stats import new_event_loop
from bench.targets import Context, freellm_config, launch_freellm

MIB = 1024 * 1024
ADMIN_KEY = "sk-soak-admin"
FIELDS = [
    "elapsed_s",
    "rss_mib",
    "open_fds",
    "asyncio_tasks",
    "turns_running",
    "leases",
    "upstream_checked_out",
    "upstream_idle",
    "requests",
    "ok",
    "failed_over",
    "hung_up",
    "http_errors",
    "stream_errors",
    "transport_errors",
    "data_dir_mib",
]


@dataclass
class SoakOptions:
    duration: float = 1800.0
    interval: float = 5.0
    concurrency: int = 16
    fail_rate: float = 0.2
    hangup_rate: float = 0.1
    chunks: int = 20
    no_pin: bool = False
    docs: str = "auto"
    command: str = "python -m bench soak"
    results_dir: Path = REPO / "bench" / "results"


def _open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


async def _runtime(http: aiohttp.ClientSession, base_url: str) -> dict[str, Any]:
    """``GET /admin/runtime`` (empty when it does not answer: the row then shows blanks)."""
    try:
        async with http.get(f"{base_url}/admin/runtime", headers={"x-api-key": ADMIN_KEY}) as resp:
            if resp.status == 200:
                data: dict[str, Any] = await resp.json()
                return data
    except (TimeoutError, aiohttp.ClientError):
        pass
    return {}


async def _reading(http: aiohttp.ClientSession, base_url: str, pid: int) -> dict[str, Any]:
    rt = await _runtime(http, base_url)
    pool = rt.get("upstream_connections") or {}
    return {
        "rss_mib": round(rss_bytes(pid) / MIB, 2),
        "open_fds": _open_fds(pid),
        "asyncio_tasks": rt.get("asyncio_tasks"),
        "turns_running": rt.get("turns_running"),
        "leases": rt.get("leases"),
        "upstream_checked_out": pool.get("checked_out"),
        "upstream_idle": pool.get("idle"),
    }


async def _sample(
    base_url: str,
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
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        while True:
            now = time.monotonic()
            row = {
                "elapsed_s": round(now - start, 1),
                **await _reading(http, base_url, pid),
                "requests": counters.requests,
                "ok": counters.ok,
                "failed_over": counters.failed_over,
                "hung_up": counters.hung_up,
                "http_errors": counters.http_errors,
                "stream_errors": counters.stream_errors,
                "transport_errors": counters.transport_errors,
                "data_dir_mib": round(_dir_bytes(data_dir) / MIB, 2),
            }
            rows.append(row)
            writer.writerow(row)
            flush()
            if now - last_print >= 60 or not rows[:-1]:
                last_print = now
                errors = row["http_errors"] + row["stream_errors"] + row["transport_errors"]
                print(
                    f"  t={row['elapsed_s']:>6.0f}s  RSS {row['rss_mib']:7.1f} MiB  fds {row['open_fds']}  "
                    f"tasks {row['asyncio_tasks']}  leases {row['leases']}  requests {row['requests']:>8}  "
                    f"failed over {row['failed_over']:>7}  hung up {row['hung_up']:>6}  client errors {errors}",
                    flush=True,
                )
            if now >= deadline:
                return
            next_at += opts.interval
            await asyncio.sleep(max(0.0, min(next_at, deadline) - time.monotonic()))


async def _drained(base_url: str, pid: int, within_s: float = 2.0) -> dict[str, Any]:
    """The reading once the load stopped: polled until nothing is held (or ``within_s`` passed), since
    nothing signals "the last lease went back" to a process outside the gateway."""
    started = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        while True:
            reading = await _reading(http, base_url, pid)
            reading["after_s"] = round(time.monotonic() - started, 2)
            reading["checked_out"] = reading.pop("upstream_checked_out")
            held = (reading["leases"], reading["checked_out"], reading["turns_running"])
            if held == (0, 0, 0) or reading["after_s"] >= within_s:
                return reading
            await asyncio.sleep(0.05)


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
        f"soak: {opts.duration:g} s through freellm, sampled every {opts.interval:g} s → {csv_path}",
        flush=True,
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
        for provider in ("flaky", "steady"):
            ctl.script(provider, HANGUP_SCENARIO, match=HANGUP_MARK, times=None)
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
                "auth": {"admin_keys": [ADMIN_KEY]},
            },
        )
        gw = launch_freellm(ctx, "freellm-soak", cfg, port)
        gw.wait_ready(f"http://127.0.0.1:{port}/health", 60)
        base_url = f"http://127.0.0.1:{port}"
        counters = Counters()
        mix = LoadMix(opts.concurrency, opts.fail_rate, opts.hangup_rate)
        drained: dict[str, Any] = {}
        with open(csv_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()

            async def main() -> None:
                start = time.monotonic()
                deadline = start + opts.duration
                await asyncio.gather(
                    drive(base_url, mix, counters, deadline),
                    _sample(
                        base_url, gw.pid, opts, counters, start, deadline, data_dir, writer, f.flush, rows
                    ),
                )
                drained.update(await _drained(base_url, gw.pid))

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
    summary = summarize(rows, opts.duration, opts.concurrency, drained)
    meta = {
        "command": opts.command,
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
        "duration_s": opts.duration,
        "interval_s": opts.interval,
        "concurrency": opts.concurrency,
        "fail_rate": opts.fail_rate,
        "hangup_rate": opts.hangup_rate,
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
