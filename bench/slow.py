"""``python -m bench slow-streams``: thousands of slow streams held open through one worker.

A real model sends a token every few tens of milliseconds for seconds on end, so a gateway in front of
many clients spends its life holding streams open, not answering instantly. This mode measures that:
the simulator paces its answer (``--tokens`` content chunks ``--gap-ms`` apart: an ``asyncio.sleep``
per chunk per stream), and :mod:`bench.slowload` holds ``--streams`` concurrent streams (1,000, 5,000
and 10,000 by default) in a closed loop through the target. Per point it records:

* RSS per open stream: (the target's RSS with the streams open, median over the window minus its idle
  RSS after one warm-up stream) ÷ streams;
* file descriptors: open fds of the target's process tree, idle and with the streams open;
* the added inter-token delay: percentiles of the gap the client sees between two content frames of a
  stream, minus the simulator's ``--gap-ms``; the ``direct`` row (the generator on the simulator, no
  gateway) shows how much of that the simulator and the client add by themselves;
* TTFB under that load (request written → first SSE frame) of the streams started in the window;
* errors: connections refused, non-200 answers, streams cut or left without ``[DONE]``, timeouts;
* CPU of each process (the target, the simulator, the generator) over the window, in % of one core:
  which of them is the limit when the gaps grow.

Placement is the run's usual one: the target alone on core 1; simulator and generator on core 0 (for
``direct`` the simulator moves to core 1). freellm is started with a soft open-file limit of 1,024 (the
common default) and must raise it itself (``freellm/server/limits_os.py``); the row records the limit
it ended with. The peers start with the limit the benchmark has.

Writes ``bench/results/slow-<time>.json`` (and ``slow-latest.json``/``.md``) and, with ``--docs``
(``auto``: a default run), the section between ``<!-- bench:slow:begin/end -->`` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench import report
from bench.loadgen import REPO, bench_env, spawn_pinned
from bench.peers import PORTKEY_VERSION, Unavailable
from bench.procs import (
    ForeignCpu,
    Placement,
    Proc,
    StartError,
    _tree_ticks,
    choose_placement,
    free_port,
    pin_tree,
    raise_priority,
    rss_bytes,
    tree_pids,
)
from bench.targets import (
    CLIENT_KEY,
    DEFAULT_REDIS_URL,
    LABELS,
    LAUNCHERS,
    MODEL,
    Context,
    Running,
    freellm_argv,
    freellm_config,
    freellm_version,
)

BEGIN = "<!-- bench:slow:begin -->"
END = "<!-- bench:slow:end -->"
SLOW_TARGETS = ("direct", "floor", "freellm", "portkey", "litellm")
"""``floor`` (the bare aiohttp proxy) says what aiohttp itself costs per relayed stream."""
DEFAULT_STREAMS = [1000, 5000, 10000]
DEFAULT_GAPS = [40.0, 400.0]
"""The issue's 40 ms, and a coarser series (a tenth of the frames) that shows memory and descriptors at
the same stream counts when the 40 ms series is bound by CPU."""
FREELLM_SOFT_NOFILE = 1024
"""freellm starts with this soft limit and raises it to the hard one itself."""
GOAL_RSS_KIB = 30.0
GOAL_ADDED_P99_MS = 5.0
GOAL_ADDED_AT = 5000
MIB = 1024 * 1024


@dataclass
class SlowOptions:
    targets: list[str] = field(default_factory=lambda: list(SLOW_TARGETS))
    streams: list[int] = field(default_factory=lambda: list(DEFAULT_STREAMS))
    gaps_ms: list[float] = field(default_factory=lambda: list(DEFAULT_GAPS))
    tokens: int = 200
    hold_s: float = 15.0
    ramp: float = 1000.0
    procs: int = 1
    install: bool = True
    no_pin: bool = False
    nice: int = -10
    results_dir: Path = REPO / "bench" / "results"
    docs: str = "auto"
    docs_path: Path = REPO / "docs" / "benchmarks.md"
    command: str = "python -m bench slow-streams"
    full: bool = True
    peer_give_up: bool = True
    """Skip a peer's larger stream counts once it could not hold a smaller one."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("slow-streams", help="hold 1,000-10,000 paced streams through one worker")
    p.add_argument("--only", default=None, help=f"targets, comma-separated: {','.join(SLOW_TARGETS)}")
    p.add_argument("--streams", default=None, help="concurrent streams per point (default 1000,5000,10000)")
    p.add_argument("--gap-ms", default=None, help="simulator gap(s) between tokens, comma-separated (40,400)")
    p.add_argument("--tokens", type=int, default=200, help="content chunks per stream (default 200)")
    p.add_argument("--hold", type=float, default=15.0, help="seconds measured per point, after the ramp")
    p.add_argument("--ramp", type=float, default=1000.0, help="connections opened per second (1000)")
    p.add_argument("--procs", type=int, default=1, help="load generator processes (default 1)")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--nice", type=int, default=-10)
    p.add_argument("--results-dir", type=Path, default=None)
    p.add_argument("--docs", choices=["auto", "always", "never"], default="auto")


def main(args: argparse.Namespace, command: str) -> int:
    targets = [t.strip() for t in (args.only or ",".join(SLOW_TARGETS)).split(",") if t.strip()]
    bad = [t for t in targets if t not in SLOW_TARGETS]
    if bad:
        raise SystemExit(f"slow-streams: unknown target(s) {bad}; choose from {', '.join(SLOW_TARGETS)}")
    streams = [int(x) for x in args.streams.split(",")] if args.streams else list(DEFAULT_STREAMS)
    gaps = [float(x) for x in args.gap_ms.split(",")] if args.gap_ms else list(DEFAULT_GAPS)
    opts = SlowOptions(
        targets=targets,
        streams=streams,
        gaps_ms=gaps,
        tokens=args.tokens,
        hold_s=args.hold,
        ramp=args.ramp,
        procs=max(1, args.procs),
        install=not args.no_install,
        no_pin=args.no_pin,
        nice=args.nice,
        docs=args.docs,
        command=command,
        full=args.only is None
        and args.streams is None
        and args.gap_ms is None
        and args.tokens == 200
        and args.hold == 15.0,
        **({"results_dir": args.results_dir} if args.results_dir else {}),
    )
    results = run(opts)
    return 0 if any(r["status"] == "ok" for r in results["rows"]) else 1  # type: ignore[union-attr]


def _body() -> str:
    return json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a long story."}], "stream": True},
        separators=(",", ":"),
    )


def _start_sim(work: Path, placement: Placement, tokens: int, gap_ms: float) -> tuple[Proc, str]:
    from bench.runner import start_sim

    return start_sim(work, placement, tokens, gap_ms)


def start_freellm_limited(ctx: Context) -> Running:
    """freellm as in the main run, started with a soft open-file limit of 1,024 under ``prlimit``."""
    import resource

    port = free_port()
    cfg = freellm_config(ctx, port, ctx.work / f"slow-freellm-{port}-data")
    path = ctx.work / f"slow-freellm-{port}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    argv = freellm_argv(path)
    prlimit = shutil.which("prlimit")
    if prlimit:
        argv = [prlimit, f"--nofile={FREELLM_SOFT_NOFILE}:{hard}", "--", *argv]
    proc = Proc(
        "freellm",
        argv,
        ctx.work / "logs" / f"slow-freellm-{port}.log",
        env=bench_env(),
        cwd=REPO,
        cores=ctx.placement.server,
    ).start()
    took = proc.ready_or_stop(f"http://127.0.0.1:{port}/health", 60)
    return Running(
        name="freellm",
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        headers={"Authorization": f"Bearer {CLIENT_KEY}"},
        version=freellm_version(),
        proc=proc,
        startup_s=took,
        note="" if prlimit else "prlimit not found: started with the benchmark's own limit",
    )


def nofile_limit(pid: int) -> str | None:
    """``soft/hard`` of "Max open files" in /proc/<pid>/limits."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                parts = line.split()
                return f"{parts[3]}/{parts[4]}"
    except OSError:
        return None
    return None


def fd_count(pid: int) -> int:
    total = 0
    for p in tree_pids(pid):
        with contextlib.suppress(OSError):
            total += len(os.listdir(f"/proc/{p}/fd"))
    return total


def warm_up(target: Running) -> str | None:
    """One streamed request, read to its first SSE frame and dropped: the first request's lazy imports
    and pools are then in the idle RSS, not counted as the streams' memory."""
    req = urllib.request.Request(
        target.url,
        data=_body().encode(),
        headers={"Content-Type": "application/json", **target.headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            first = resp.read1(4096) if hasattr(resp, "read1") else resp.read(64)
            return None if b"data:" in first else f"no SSE frame in the first read: {first[:120]!r}"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


class Sampler:
    """RSS and open fds of the target every 0.5 s inside the window."""

    def __init__(self, pid: int, window: tuple[float, float]) -> None:
        self.pid, self.window = pid, window
        self.rss: list[int] = []
        self.fds: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            now = time.time()
            if self.window[0] <= now < self.window[1]:
                self.rss.append(rss_bytes(self.pid))
                self.fds.append(fd_count(self.pid))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _generators(
    target: Running,
    n: int,
    opts: SlowOptions,
    start_at: float,
    window: tuple[float, float],
    gap_ms: float,
    cores: frozenset[int] | None,
) -> list[subprocess.Popen[str]]:
    per = [n // opts.procs + (1 if i < n % opts.procs else 0) for i in range(opts.procs)]
    stream_s = opts.tokens * gap_ms / 1000.0
    out = []
    for share in per:
        if not share:
            continue
        argv = [
            sys.executable,
            "-m",
            "bench.slowload",
            "--url",
            target.url,
            "--body",
            _body(),
            *(a for k, v in target.headers.items() for a in ("--header", f"{k}: {v}")),
            "--streams",
            str(share),
            "--ramp",
            str(opts.ramp / opts.procs),
            "--start-at",
            f"{start_at:.3f}",
            "--window-start",
            f"{window[0]:.3f}",
            "--window-end",
            f"{window[1]:.3f}",
            "--stream-timeout",
            f"{max(60.0, 4 * stream_s + 30):.0f}",
        ]
        out.append(spawn_pinned(argv, cores))
    return out


def _merge(parts: list[dict[str, object]]) -> dict[str, object]:
    from bench.slowload import MAX_BUCKET, percentiles

    gaps = [0] * (MAX_BUCKET + 1)
    ttfb = [0] * (MAX_BUCKET + 1)
    errors: dict[str, int] = {}
    out: dict[str, object] = {
        "frames": 0,
        "started": 0,
        "completed": 0,
        "open_min": 0,
        "open_median": 0,
        "connected": 0,
    }
    last_error = ""
    for p in parts:
        for i, c in p["gap_hist"].items():  # type: ignore[attr-defined]
            gaps[int(i)] += c
        for i, c in p["ttfb_hist"].items():  # type: ignore[attr-defined]
            ttfb[int(i)] += c
        for k, v in p["errors"].items():  # type: ignore[attr-defined]
            errors[k] = errors.get(k, 0) + int(v)
        for k in ("frames", "started", "completed", "connected"):
            out[k] = int(out[k]) + int(p[k])  # type: ignore[call-overload]
        out["open_min"] = int(out["open_min"]) + int(p["open_min"] or 0)  # type: ignore[call-overload]
        out["open_median"] = int(out["open_median"]) + int(p.get("open_median") or 0)  # type: ignore[call-overload]
        last_error = str(p.get("last_error") or last_error)
    g = percentiles(gaps, (50, 90, 99, 99.9))
    t = percentiles(ttfb, (50, 99))
    out.update(
        gap_p50_ms=g["p50"],
        gap_p90_ms=g["p90"],
        gap_p99_ms=g["p99"],
        gap_p999_ms=g["p99.9"],
        ttfb_p50_ms=t["p50"],
        ttfb_p99_ms=t["p99"],
        error_detail=errors,
        errors=sum(errors.values()),
        last_error=last_error,
    )
    return out


def measure_point(
    name: str, ctx: Context, sim: Proc, n: int, gap_ms: float, opts: SlowOptions
) -> dict[str, object]:
    row: dict[str, object] = {
        "target": name,
        "label": LABELS[name],
        "streams": n,
        "gap_ms": gap_ms,
        "tokens": opts.tokens,
        "status": "ok",
    }
    print(f"\n== {LABELS[name]}: {n:,} streams, {gap_ms:g} ms apart", flush=True)
    try:
        target = start_freellm_limited(ctx) if name == "freellm" else LAUNCHERS[name](ctx)
    except (Unavailable, StartError) as exc:
        row.update(status="unavailable", reason=str(exc).splitlines()[0][:300])
        print(f"   unavailable: {row['reason']}", flush=True)
        return row
    server_pid = target.proc.pid if target.proc else sim.pid
    if name == "direct":
        pin_tree(sim.pid, ctx.placement.server)
    try:
        row["version"] = target.version
        problem = warm_up(target)
        if problem:
            row.update(status="failed", reason=f"warm-up stream: {problem}")
            print(f"   failed: {row['reason']}", flush=True)
            return row
        time.sleep(1.0)
        idle_rss = rss_bytes(server_pid)
        idle_fds = fd_count(server_pid)
        row.update(idle_rss_mib=round(idle_rss / MIB, 1), idle_fds=idle_fds, nofile=nofile_limit(server_pid))
        ramp_s = n / opts.ramp
        start_at = time.time() + 1.5
        window = (ramp_s + 2.0, ramp_s + 2.0 + opts.hold_s)
        gens = _generators(target, n, opts, start_at, window, gap_ms, ctx.placement.load)
        abs_window = (start_at + window[0], start_at + window[1])
        with Sampler(server_pid, abs_window) as sampler:
            time.sleep(max(0.0, abs_window[0] - time.time()))
            pids = {"server": server_pid, "sim": sim.pid, "generator": [g.pid for g in gens]}
            ticks0 = _ticks(pids)
            t0 = time.monotonic()
            with ForeignCpu() as foreign:
                time.sleep(max(0.0, abs_window[1] - time.time()))
            ticks1 = _ticks(pids)
            elapsed = time.monotonic() - t0
        parts = []
        for g in gens:
            try:
                out, err = g.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                g.kill()
                out, err = g.communicate()
            line = next((ln for ln in out.splitlines() if ln.startswith("BENCH_JSON ")), None)
            if line is None:
                row.update(status="failed", reason=f"load generator: {err.strip()[-300:]}")
                return row
            parts.append(json.loads(line[len("BENCH_JSON ") :]))
        got = _merge(parts)
        hz = os.sysconf("SC_CLK_TCK")
        cpu = {k: round(100.0 * (ticks1[k] - ticks0[k]) / hz / elapsed, 1) for k in ticks0}
        rss_open = statistics.median(sampler.rss) if sampler.rss else None
        fds_open = max(sampler.fds) if sampler.fds else None
        alive = target.proc is None or target.proc.alive()
        row.update(
            got,
            window_s=opts.hold_s,
            frames_per_s=round(int(got["frames"]) / opts.hold_s),  # type: ignore[call-overload]
            nominal_frames_per_s=round(n * 1000.0 / gap_ms),
            added_gap_p50_ms=_minus(got["gap_p50_ms"], gap_ms),
            added_gap_p99_ms=_minus(got["gap_p99_ms"], gap_ms),
            added_gap_p999_ms=_minus(got["gap_p999_ms"], gap_ms),
            rss_open_mib=round(rss_open / MIB, 1) if rss_open else None,
            peak_rss_mib=round(max(sampler.rss) / MIB, 1) if sampler.rss else None,
            fds_median=statistics.median(sampler.fds) if sampler.fds else None,
            fds_open=fds_open,
            cpu_server_pct=cpu["server"],
            cpu_sim_pct=cpu["sim"],
            cpu_generator_pct=cpu["generator"],
            foreign_cpu_pct=foreign.pct,
            server_alive=alive,
        )
        frames_s = int(got["frames"]) / opts.hold_s  # type: ignore[call-overload]
        if frames_s > 0:
            # CPU per relayed frame (the per-request work amortised over its frames): one core's worth
            # of frames a second, and so the streams one core could pace at this gap, follow from it.
            per_frame = cpu["server"] / 100.0 / frames_s * 1e6
            row["cpu_us_per_frame"] = round(per_frame, 1)
            row["streams_per_core"] = round(1e6 / per_frame * gap_ms / 1000.0)
        if not alive:
            row["status"] = "crashed"
            row["reason"] = _last_error_line(target.proc.log_tail(30)) if target.proc else ""
        per_stream(row)
        print("   " + point_line(row), flush=True)
    finally:
        target.stop()
        if name == "direct":
            pin_tree(sim.pid, ctx.placement.load)
    return row


def _last_error_line(log: str) -> str:
    from bench.runner import _last_error_line as last

    return last(log)


def _minus(a: object, b: float) -> float | None:
    return None if a is None else round(float(a) - b, 2)  # type: ignore[arg-type]


def _ticks(pids: dict[str, object]) -> dict[str, int]:
    out = {}
    for k, v in pids.items():
        out[k] = sum(_tree_ticks(p) for p in v) if isinstance(v, list) else _tree_ticks(int(v))  # type: ignore[call-overload]
    return out


def per_stream(row: dict[str, object]) -> None:
    """RSS per stream over the streams the target really holds: its open descriptors beyond the idle
    ones, one per stream for the simulator and two (client and upstream) for a gateway. That counts a
    request waiting for the upstream's first byte (it holds both sockets and its state) and leaves out a
    connection still queued in the accept backlog (the kernel's memory, not the process's)."""
    fds = row.get("fds_median") or row.get("fds_open")
    idle, rss, rss_idle = row.get("idle_fds"), row.get("rss_open_mib"), row.get("idle_rss_mib")
    if fds is None or idle is None or rss is None or rss_idle is None:
        return
    held = (float(fds) - float(idle)) / (1 if row["target"] == "direct" else 2)  # type: ignore[arg-type]
    row["in_target"] = round(held)
    if held >= 1:
        row["rss_per_stream_kib"] = round((float(rss) - float(rss_idle)) * 1024 / held, 1)  # type: ignore[arg-type]


def held(row: dict[str, object]) -> bool:
    """The target held the point: streams open throughout, at most 1 % of them in error."""
    if row.get("status") != "ok":
        return False
    started = max(1, int(row.get("started") or 0))  # type: ignore[call-overload]
    return int(row.get("errors") or 0) <= 0.01 * started and int(row.get("open_min") or 0) >= 0.9 * int(
        row["streams"]
    )  # type: ignore[call-overload]


def point_line(r: dict[str, object]) -> str:
    return (
        f"held ≥ {r.get('open_min')} open; {r.get('frames_per_s')}/{r.get('nominal_frames_per_s')} frames/s; "
        f"gap p50 {r.get('gap_p50_ms')} p99 {r.get('gap_p99_ms')} ms (added p99 {r.get('added_gap_p99_ms')}); "
        f"TTFB p50 {r.get('ttfb_p50_ms')} p99 {r.get('ttfb_p99_ms')} ms; RSS {r.get('idle_rss_mib')} → "
        f"{r.get('rss_open_mib')} MiB ({r.get('rss_per_stream_kib')} KiB/stream); fds {r.get('idle_fds')} → "
        f"{r.get('fds_open')}; errors {r.get('errors')} {r.get('error_detail') or ''}; CPU server "
        f"{r.get('cpu_server_pct')}% sim {r.get('cpu_sim_pct')}% gen {r.get('cpu_generator_pct')}%; "
        f"foreign {r.get('foreign_cpu_pct')}%"
    )


def run(opts: SlowOptions) -> dict[str, object]:
    from bench.runner import _loadavg, base_versions, machine_facts

    started = time.time()
    placement = choose_placement(opts.no_pin)
    if placement.pinned and placement.load is not None:
        os.sched_setaffinity(0, placement.load)
    priority = raise_priority(opts.nice)
    work = Path(tempfile.mkdtemp(prefix="freellm-slow-"))
    import resource

    results: dict[str, object] = {
        "kind": "slow-streams",
        "meta": {
            "command": opts.command,
            "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
            "tokens": opts.tokens,
            "hold_s": opts.hold_s,
            "ramp_per_s": opts.ramp,
            "generator_procs": opts.procs,
            "placement": placement.describe(),
            "priority": priority,
            "machine": machine_facts(),
            "versions": base_versions(),
            "nofile_bench": "/".join(str(x) for x in resource.getrlimit(resource.RLIMIT_NOFILE)),
            "loadavg_at_start": _loadavg(),
        },
        "rows": [],
    }
    rows: list[dict[str, object]] = results["rows"]  # type: ignore[assignment]
    try:
        for gap in opts.gaps_ms:
            sim, base = _start_sim(work, placement, opts.tokens, gap)
            ctx = Context(base, sim, work, placement, 1, opts.install, PORTKEY_VERSION, DEFAULT_REDIS_URL)
            try:
                for name in SLOW_TARGETS:
                    if name not in opts.targets:
                        continue
                    failed_at: int | None = None
                    for n in opts.streams:
                        if failed_at is not None and name in ("portkey", "litellm") and opts.peer_give_up:
                            rows.append(
                                {
                                    "target": name,
                                    "label": LABELS[name],
                                    "streams": n,
                                    "gap_ms": gap,
                                    "tokens": opts.tokens,
                                    "status": "skipped",
                                    "reason": f"could not hold {failed_at:,} streams",
                                }
                            )
                            continue
                        try:
                            row = measure_point(name, ctx, sim, n, gap, opts)
                        except Exception as exc:  # one broken point must not lose the rest
                            row = {
                                "target": name,
                                "label": LABELS[name],
                                "streams": n,
                                "gap_ms": gap,
                                "tokens": opts.tokens,
                                "status": "failed",
                                "reason": f"{type(exc).__name__}: {exc}"[:300],
                            }
                        rows.append(row)
                        if row.get("status") == "unavailable":
                            break
                        if not held(row) and failed_at is None:
                            failed_at = n
                        time.sleep(1.0)
            finally:
                sim.stop()
    finally:
        if (work / "logs").exists():
            shutil.copytree(work / "logs", opts.results_dir / "logs-slow", dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    results["meta"]["elapsed_s"] = round(time.time() - started, 1)  # type: ignore[index]
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    md = markdown(results)
    for stem in (f"slow-{stamp}", "slow-latest"):
        (opts.results_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
        (opts.results_dir / f"{stem}.md").write_text(md)
    print("\n" + md)
    if opts.docs == "always" or (opts.docs == "auto" and opts.full):
        report.update_docs(opts.docs_path, BEGIN, END, md)
        print(f"updated {opts.docs_path}")
    else:
        print("(docs not updated: partial run; pass --docs always)")
    return results


def _n(v: object, digits: int = 1) -> str:
    if v is None:
        return report.DASH
    if isinstance(v, int):
        return f"{v:,}"
    f = float(v)  # type: ignore[arg-type]
    return f"{f:,.{digits}f}" if abs(f) < 1000 else f"{f:,.0f}"


def markdown(results: dict) -> str:
    meta = results["meta"]
    m = meta["machine"]
    rows = results["rows"]
    lines = [
        f"Run {meta['started_at']} with `{meta['command']}` ({meta.get('elapsed_s', '?')} s in all).",
        "",
        f"- Streams of {meta['tokens']} content chunks, paced by the simulator; connections opened at "
        f"{meta['ramp_per_s']:g}/s, then {meta['hold_s']:g} s measured with every stream open; "
        f"{meta['generator_procs']} generator process(es) (`bench/slowload.py`).",
        f"- Placement: {meta['placement']}; {meta.get('priority', '')}.",
        f"- Machine: {m['nproc']} cores ({m['cpu']}), {m['memory_gib']} GiB, Linux {m['kernel']}; open-file "
        f"limit of the benchmark (soft/hard) {meta['nofile_bench']}.",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
        f"- Load average at start: {meta.get('loadavg_at_start')}.",
        "",
        "| target | streams | gap ms | held (min / median open) | frames/s (of nominal) | client gap p50 / p99 ms | added p50 / p99 / p99.9 ms "
        "| TTFB p50 / p99 ms | RSS idle → open MiB | streams in target | KiB per stream | fds idle → open | errors | CPU % target / sim / generator "
        "| target CPU µs per frame (streams one core could pace) | other CPU % |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        per_stream(r)
    for r in rows:
        if r.get("status") not in ("ok", "crashed"):
            lines.append(
                f"| {r['label']} | {r['streams']:,} | {r['gap_ms']:g} | {r['status']}: {report._md(r.get('reason', ''))} | | | | | | | | | | |"
            )
            continue
        err = str(r.get("errors") or 0)
        detail = {k: v for k, v in (r.get("error_detail") or {}).items() if v}
        if detail:
            err += " (" + ", ".join(f"{k} {v:,}" for k, v in detail.items()) + ")"
        if r.get("status") == "crashed":
            err += f"; **crashed**: {report._md(str(r.get('reason', '')))}"
        lines.append(
            f"| {r['label']} | {r['streams']:,} | {r['gap_ms']:g} | {_n(r.get('open_min'))} / {_n(r.get('open_median'))} | "
            f"{_n(r.get('frames_per_s'))} ({_pct(r.get('frames_per_s'), r.get('nominal_frames_per_s'))}) | "
            f"{_n(r.get('gap_p50_ms'))} / {_n(r.get('gap_p99_ms'))} | "
            f"{_signed(r.get('added_gap_p50_ms'))} / {_signed(r.get('added_gap_p99_ms'))} / {_signed(r.get('added_gap_p999_ms'))} | "
            f"{_n(r.get('ttfb_p50_ms'))} / {_n(r.get('ttfb_p99_ms'))} | "
            f"{_n(r.get('idle_rss_mib'))} → {_n(r.get('rss_open_mib'))} | {_n(r.get('in_target'))} | "
            f"{_n(r.get('rss_per_stream_kib'))} | "
            f"{_n(r.get('idle_fds'))} → {_n(r.get('fds_open'))} | {err} | "
            f"{_n(r.get('cpu_server_pct'), 0)} / {_n(r.get('cpu_sim_pct'), 0)} / {_n(r.get('cpu_generator_pct'), 0)} | "
            f"{_n(r.get('cpu_us_per_frame'))} ({_n(r.get('streams_per_core'))}) | "
            f"{_n(r.get('foreign_cpu_pct'), 0)}{' †' if (r.get('foreign_cpu_pct') or 0) > report.NOISY_PCT else ''} |"
        )
    nofile = [r for r in rows if r["target"] == "freellm" and r.get("nofile")]
    if nofile:
        lines += [
            "",
            f"freellm was started with a soft open-file limit of {FREELLM_SOFT_NOFILE:,} and ran with "
            f"{nofile[0]['nofile']} (soft/hard) after raising it itself.",
        ]
    goals = goal_rows(rows)
    if goals:
        lines += [
            "",
            "| issue 17 slow-stream goal | streams | gap ms | measured | goal | met |",
            "|---|--:|--:|--:|--:|---|",
        ]
        for g in goals:
            lines.append(
                f"| {g['goal']} | {g['streams']:,} | {g['gap_ms']:g} | {g['value']} | {g['target']} | {'yes' if g['met'] else '**no**'} |"
            )
    return "\n".join(lines) + "\n"


def goal_rows(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        if r["target"] != "freellm" or r.get("status") not in ("ok", "crashed"):
            continue
        kib = r.get("rss_per_stream_kib")
        if kib is not None:
            out.append(
                {
                    "goal": "RSS per open stream",
                    "streams": r["streams"],
                    "gap_ms": r["gap_ms"],
                    "value": f"{kib:.1f} KiB",
                    "target": f"≤ {GOAL_RSS_KIB:g} KiB",
                    "met": kib <= GOAL_RSS_KIB,
                }
            )
        added = r.get("added_gap_p99_ms")
        if r["streams"] == GOAL_ADDED_AT and added is not None:
            out.append(
                {
                    "goal": "added inter-token p99",
                    "streams": r["streams"],
                    "gap_ms": r["gap_ms"],
                    "value": f"{added:+.1f} ms",
                    "target": f"≤ {GOAL_ADDED_P99_MS:g} ms",
                    "met": added <= GOAL_ADDED_P99_MS,
                }
            )
        out.append(
            {
                "goal": "no errors",
                "streams": r["streams"],
                "gap_ms": r["gap_ms"],
                "value": f"{r.get('errors', 0):,}",
                "target": "0",
                "met": not r.get("errors") and r.get("status") == "ok",
            }
        )
    return out


def _pct(a: object, b: object) -> str:
    if a is None or not b:
        return report.DASH
    return f"{100.0 * float(a) / float(b):.0f} %"  # type: ignore[arg-type]


def _signed(v: object) -> str:
    if v is None:
        return report.DASH
    f = float(v)  # type: ignore[arg-type]
    return ("+" if f > 0 else "") + (f"{f:.1f}" if abs(f) < 1000 else f"{f:,.0f}")


if __name__ == "__main__":  # pragma: no cover
    print("use: python -m bench slow-streams", file=sys.stderr)
    sys.exit(2)
