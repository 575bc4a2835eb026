"""One benchmark run: the simulator, then each target in turn, every cell measured the same way."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench import loadgen, report
from bench.loadgen import REPO, Request, bench_env
from bench.peers import PORTKEY_VERSION, Unavailable
from bench.procs import (
    CellCpu,
    ForeignCpu,
    Placement,
    Proc,
    RssSampler,
    StartError,
    choose_placement,
    free_port,
    pin_tree,
    raise_priority,
    rss_bytes,
)
from bench.stats import VARY, body_source
from bench.targets import (
    ADMIN_KEY,
    ALL_TARGETS,
    DEFAULT_REDIS_URL,
    DEFAULT_TARGETS,
    GATEWAYS,
    LABELS,
    LAUNCHERS,
    MODEL,
    Context,
    Running,
)

MODES = ("non-stream", "stream")
PROMPT = "Say hello, one small piece at a time."
MIB = 1024 * 1024


@dataclass
class Options:
    duration: float = 10.0
    warmup: float = 1.0
    concurrency: list[int] = field(default_factory=lambda: [1, 16, 64])
    targets: list[str] = field(default_factory=lambda: list(DEFAULT_TARGETS))
    modes: list[str] = field(default_factory=lambda: list(MODES))
    chunks: int = 20
    chunk_delay_ms: float = 0.0
    workers: int = 1
    loadgen: str = "auto"
    probe_rate: float = 10.0
    probe_alone_s: float | None = None
    install: bool = True
    no_pin: bool = False
    results_dir: Path = REPO / "bench" / "results"
    docs: str = "auto"
    docs_path: Path = REPO / "docs" / "benchmarks.md"
    command: str = "python -m bench run"
    wait_idle: float = 0.0
    """Seconds to wait, before starting, for other processes to use < NOISY_PCT of a core."""
    nice: int = -10
    portkey_version: str = PORTKEY_VERSION
    redis_url: str = DEFAULT_REDIS_URL
    """The ``freellm-redis`` row's server."""
    full: bool = True
    """Default targets, modes, concurrencies and durations: only such a run updates the docs by default."""
    preset: str = "default"
    """``features`` (``--features``): its docs section is the features table's, between its own markers."""


def chat_body(stream: bool, varied: bool = False, body: str = "default") -> bytes:
    """The one request body of a cell; ``varied``: with :data:`~bench.stats.VARY` at the end of the user
    message, which the load generators replace with a string unique to each request. ``body="transcript"``:
    the ~20k-token agent transcript of :mod:`bench.transcript` instead of one short user message."""
    if body == "transcript":
        from bench import transcript

        messages = transcript.messages()
        return json.dumps(
            {"model": MODEL, "messages": messages, "stream": stream}, separators=(",", ":")
        ).encode()
    content = f"{PROMPT} #{VARY}" if varied else PROMPT
    return json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": content}], "stream": stream},
        separators=(",", ":"),
    ).encode()


def start_sim(work: Path, placement: Placement, chunks: int, chunk_delay_ms: float) -> tuple[Proc, str]:
    port = free_port()
    script = Path(sys.executable).parent / "freellm"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "freellm.cli"]
    argv = [*base, "--log-level", "WARNING", "sim", "--port", str(port), "--chunks", str(chunks)]
    if chunk_delay_ms:
        argv += ["--chunk-delay-ms", str(chunk_delay_ms)]
    proc = Proc(
        "sim", argv, work / "logs" / "sim.log", env=bench_env(), cwd=REPO, cores=placement.load
    ).start()
    base_url = f"http://127.0.0.1:{port}"
    proc.wait_ready(f"{base_url}/_sim/health", 30)
    return proc, base_url


def _post(target: Running, body: bytes) -> tuple[bytes, dict[str, str]] | str:
    """One request through the target: (body, headers), or what went wrong."""
    req = urllib.request.Request(
        target.url,
        data=body,
        headers={"Content-Type": "application/json", **target.headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.read(), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {exc.read()[:200].decode(errors='replace')}"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def _complete(data: bytes, stream: bool, chunks: int) -> str | None:
    if stream:
        frames = data.count(b"data:")
        if b"[DONE]" not in data or frames < chunks:
            return (
                f"incomplete stream ({frames} frames, [DONE] {'present' if b'[DONE]' in data else 'missing'})"
            )
        return None
    try:
        content = json.loads(data)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return f"not a chat completion: {data[:200].decode(errors='replace')}"
    return None if content else "empty completion"


def sanity(target: Running, stream: bool, chunks: int) -> str | None:
    """A request through the target, checked for a complete answer; returns the problem or None.

    For the freellm rows also the cache's ``X-FreeLLM-Cache`` header: absent on plain ``freellm`` (the
    cache is off by default); ``MISS`` on two requests with different bodies (``freellm-cache-miss``);
    ``HIT`` with ``X-Routed-Via: cache`` on the second of two identical requests, with the very bytes of
    the first (``freellm-cache-hit``).
    """
    next_body = body_source(chat_body(stream, target.varied, target.body))
    got = _post(target, next_body())
    if isinstance(got, str):
        return got
    data, headers = got
    problem = _complete(data, stream, chunks)
    if not problem and target.compressed:
        said = headers.get("x-freellm-compress", "")
        if not said.startswith("lossless") or said.endswith("saved~=0"):
            problem = f"X-FreeLLM-Compress: {said or '(absent)'} (want lossless with tokens saved)"
    if problem or target.cache is None:
        return problem
    first = headers.get("x-freellm-cache")
    if target.cache == "off":
        return None if first is None else f"X-FreeLLM-Cache: {first} with the cache off"
    if target.cache == "MISS" and first != "MISS":
        return f"X-FreeLLM-Cache: {first} on a unique request (want MISS)"
    if target.cache == "HIT" and first not in ("MISS", "HIT"):
        return f"X-FreeLLM-Cache: {first} on the first request (want MISS)"
    again = _post(target, next_body())
    if isinstance(again, str):
        return f"second request: {again}"
    data2, headers2 = again
    problem = _complete(data2, stream, chunks)
    if problem:
        return f"second request: {problem}"
    second = headers2.get("x-freellm-cache")
    if target.cache == "MISS":
        return (
            None if second == "MISS" else f"X-FreeLLM-Cache: {second} on a second unique request (want MISS)"
        )
    if second != "HIT" or headers2.get("x-routed-via") != "cache":
        return (
            f"X-FreeLLM-Cache: {second}, X-Routed-Via: {headers2.get('x-routed-via')} on a repeated request "
            "(want HIT, cache)"
        )
    return None if data2 == data else "a hit did not replay the first answer's bytes"


def cache_stats(target: Running) -> dict[str, object] | None:
    """``/admin/cache/stats`` of a cache row (hits, misses, entries since the process started)."""
    if not target.admin_url:
        return None
    req = urllib.request.Request(target.admin_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_load(
    opts: Options, tool: str, req: Request, c: int, seconds: float, cores: frozenset[int] | None
) -> loadgen.LoadResult:
    if tool == "wrk":
        return loadgen.run_wrk(req, c, seconds, cores)
    return loadgen.run_python(req, c, seconds, cores)


def ctx_sim_pid(target: Running) -> int | None:
    """For ``direct`` the server under test is the simulator (set by measure_target)."""
    return target.sim_pid


def run_cell(
    opts: Options, tool: str, target: Running, mode: str, c: int, placement: Placement
) -> dict[str, object]:
    stream = mode == "stream"
    req = Request(
        target.url,
        chat_body(stream, target.varied, target.body),
        {"Content-Type": "application/json", **target.headers},
    )
    cell: dict[str, object] = {"mode": mode, "c": c}
    load_cores = placement.load
    with contextlib.ExitStack() as stack:
        sampler = stack.enter_context(RssSampler(target.proc.pid)) if target.proc else None
        if opts.warmup > 0:
            run_load(opts, tool, req, c, opts.warmup, load_cores)
        probe = None
        if stream and c == 1:
            # TTFB at concurrency 1: the probe alone, one stream after another.
            alone = opts.probe_alone_s if opts.probe_alone_s is not None else max(0.5, opts.duration / 2)
            p = loadgen.start_probe(req, alone, 0.0, load_cores)
            probe = loadgen.probe_result(p, alone + 60)
        server_pid = target.proc.pid if target.proc else ctx_sim_pid(target)
        with ForeignCpu() as foreign, CellCpu(server_pid, load_cores) as cpu:
            p = None
            if stream and c > 1:
                # Under load: a low-rate probe on its own connection alongside the load generator.
                p = loadgen.start_probe(req, opts.duration, opts.probe_rate, load_cores)
            result = run_load(opts, tool, req, c, opts.duration, load_cores)
            if p is not None:
                probe = loadgen.probe_result(p, opts.duration + 60)
    cell.update(
        tool=result.tool,
        rps=result.rps,
        requests=result.requests,
        duration_s=result.duration_s,
        p50_ms=result.p50_ms,
        p90_ms=result.p90_ms,
        p99_ms=result.p99_ms,
        max_ms=result.max_ms,
        errors=result.error_count,
        error_detail={k: v for k, v in result.errors.items() if v},
    )
    if probe is not None:
        cell.update(
            ttfb_p50_ms=probe["ttfb_p50_ms"],
            ttfb_p99_ms=probe["ttfb_p99_ms"],
            ttfb_n=probe["requests"],
            ttfb_errors=probe["errors"],
            **({"ttfb_last_error": probe["last_error"]} if probe.get("errors") else {}),
            probe_rate=0.0 if c == 1 else opts.probe_rate,
        )
    if sampler:
        cell["peak_rss_mb"] = round(sampler.peak / MIB, 1)
    cell["foreign_cpu_pct"] = foreign.pct
    cell["server_cpu_pct"] = cpu.server_pct
    cell["load_core_pct"] = cpu.load_core_pct
    return cell


def measure_target(name: str, ctx: Context, opts: Options, tool: str) -> dict[str, object]:
    out: dict[str, object] = {"name": name, "label": LABELS[name], "status": "ok", "cells": []}
    print(f"\n== {LABELS[name]}", flush=True)
    try:
        target = LAUNCHERS[name](ctx)
    except Unavailable as exc:
        out.update(status="unavailable", reason=str(exc))
        print(f"   unavailable: {exc}", flush=True)
        return out
    except StartError as exc:
        out.update(status="unavailable", reason=f"did not start: {str(exc).splitlines()[0]}")
        print(f"   {exc}", flush=True)
        return out
    out.update(version=target.version, startup_s=round(target.startup_s, 2))
    if target.note:
        out["note"] = target.note
    if name == "direct":
        pin_tree(ctx.sim_proc.pid, ctx.placement.server)  # the simulator is the server under test here
        target.sim_pid = ctx.sim_proc.pid
    try:
        for stream in (False, True):
            problem = sanity(target, stream, opts.chunks)
            if problem:
                out.update(
                    status="failed", reason=f"{'stream' if stream else 'non-stream'} sanity check: {problem}"
                )
                print(f"   failed: {out['reason']}", flush=True)
                return out
        if target.proc:
            time.sleep(1.0)
            out["idle_rss_mb"] = round(rss_bytes(target.proc.pid) / MIB, 1)
        cells: list[dict[str, object]] = []
        crashes: list[str] = []
        for mode in opts.modes:
            for c in opts.concurrency:
                retried = False
                while True:
                    if target.proc and not target.proc.alive():
                        target.stop()
                        if len(crashes) > MAX_RESTARTS:
                            cell = {"mode": mode, "c": c, "error": "server exited (restart limit reached)"}
                            break
                        try:
                            target = LAUNCHERS[name](ctx)
                        except Exception as exc:
                            cell = {
                                "mode": mode,
                                "c": c,
                                "error": f"server exited; restart failed: {exc}"[:300],
                            }
                            break
                    try:
                        cell = run_cell(opts, tool, target, mode, c, ctx.placement)
                    except Exception as exc:  # one broken cell must not lose the rest of the run
                        cell = {"mode": mode, "c": c, "error": f"{type(exc).__name__}: {exc}"[:300]}
                    if not (target.proc and not target.proc.alive()):
                        if retried:
                            cell["retried_after_crash"] = crashes[-1]
                        break
                    why = _last_error_line(target.proc.log_tail(30))
                    code = target.proc.popen.returncode if target.proc.popen else None
                    crashes.append(f"exited (code {code}) during {mode} c={c}: {why}")
                    print(f"   !! {LABELS[name]} {crashes[-1]}", flush=True)
                    if retried:
                        cell = {
                            "mode": mode,
                            "c": c,
                            "error": f"server crashed twice in this cell: {why}"[:300],
                        }
                        break
                    retried = True
                    print("   !! restarting it and measuring the cell again", flush=True)
                cells.append(cell)
                print("   " + report.cell_line(cell), flush=True)
                time.sleep(0.3)
        if crashes:
            out["crashes"] = crashes
        out["cells"] = cells
        stats = cache_stats(target)
        if stats is not None:
            out["cache_stats"] = stats
            print(f"   cache: {report.cache_stats_line(stats)}", flush=True)
        peaks = [float(c["peak_rss_mb"]) for c in cells if "peak_rss_mb" in c]  # type: ignore[arg-type]
        if peaks:
            out["peak_rss_mb"] = max(peaks)
    finally:
        target.stop()
        if name == "direct":
            pin_tree(ctx.sim_proc.pid, ctx.placement.load)
    return out


MAX_RESTARTS = 2


def wait_for_idle(limit_s: float) -> None:
    """Wait until processes not started by the benchmark use < NOISY_PCT of a core (2 s windows)."""
    deadline = time.monotonic() + limit_s
    while True:
        with ForeignCpu() as f:
            time.sleep(2.0)
        if f.pct is None or f.pct < report.NOISY_PCT:
            print(f"machine idle enough (other processes: {f.pct}% of a core)", flush=True)
            return
        if time.monotonic() >= deadline:
            print(
                f"!! still busy after {limit_s:g} s (other processes: {f.pct}% of a core); starting anyway",
                flush=True,
            )
            return
        print(f"   waiting for the machine to go idle (other processes: {f.pct}% of a core) …", flush=True)


def _loadavg() -> str | None:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return None


def _last_error_line(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if any(w in ln for w in ("Error", "error", "Exception", "Traceback")):
            return ln[:200]
    return lines[-1][:200] if lines else "no log output"


def machine_facts() -> dict[str, object]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": mem_gib,
        "kernel": platform.release(),
        "os": platform.platform(terse=True),
    }


def base_versions() -> dict[str, str]:
    import aiohttp

    from bench.targets import freellm_version

    versions = {
        "freellm": freellm_version(),
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
    }
    try:
        import uvloop

        versions["uvloop"] = uvloop.__version__
    except ImportError:  # pragma: no cover
        pass
    return versions


def choose_tool(requested: str) -> tuple[str, str]:
    """Returns (tool, label) for the load generator."""
    wrk = loadgen.wrk_path()
    if requested == "wrk" and not wrk:
        raise SystemExit(
            "wrk not found: install it (Debian/Ubuntu: apt-get install -y wrk) or use --loadgen python"
        )
    if requested == "python" or not wrk:
        if not wrk:
            print(
                "!! wrk not found (Debian/Ubuntu: apt-get install -y wrk). Falling back to the Python load generator:\n"
                "!! its numbers are NOT comparable with wrk's (it saturates its own core first).",
                flush=True,
            )
        return "python", "python-fallback (aiohttp client; not comparable with wrk)"
    return "wrk", f"wrk {loadgen.wrk_version()}"


def run(opts: Options) -> dict[str, object]:
    started = time.time()
    placement = choose_placement(opts.no_pin)
    if placement.pinned and placement.load is not None:
        os.sched_setaffinity(0, placement.load)  # this orchestrator stays off the server core too
    priority = raise_priority(opts.nice)
    tool, tool_label = choose_tool(opts.loadgen)
    print(f"load generator: {tool_label}", flush=True)
    print(f"placement: {placement.describe()}", flush=True)
    if opts.wait_idle > 0:
        wait_for_idle(opts.wait_idle)
    else:
        with ForeignCpu() as now:
            time.sleep(1.0)
        if now.pct is not None and now.pct > report.NOISY_PCT:
            print(
                f"!! other processes are using {now.pct}% of a core: they skew the numbers "
                "(--wait-idle S waits for a quiet machine)",
                flush=True,
            )
    work = Path(tempfile.mkdtemp(prefix="freellm-bench-"))
    results: dict[str, object] = {
        "meta": {
            "command": opts.command,
            "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
            "duration_s": opts.duration,
            "warmup_s": opts.warmup,
            "concurrency": opts.concurrency,
            "modes": opts.modes,
            "chunks": opts.chunks,
            "chunk_delay_ms": opts.chunk_delay_ms,
            "workers": opts.workers,
            "loadgen": tool,
            "loadgen_label": tool_label,
            "probe_rate": opts.probe_rate,
            "placement": placement.describe(),
            "priority": priority,
            "machine": machine_facts(),
            "versions": {
                **base_versions(),
                **({"wrk": loadgen.wrk_version() or ""} if tool == "wrk" else {}),
            },
            "work_dir": str(work),
            "loadavg_at_start": _loadavg(),
            "preset": opts.preset,
        },
        "targets": {},
    }
    sim_proc = None
    try:
        sim_proc, sim_base = start_sim(work, placement, opts.chunks, opts.chunk_delay_ms)
        ctx = Context(
            sim_base,
            sim_proc,
            work,
            placement,
            opts.workers,
            opts.install,
            opts.portkey_version,
            opts.redis_url,
        )
        for name in ALL_TARGETS:
            if name not in opts.targets:
                continue
            try:
                res = measure_target(name, ctx, opts, tool)
            except Exception as exc:
                traceback.print_exc()
                res = {
                    "name": name,
                    "label": LABELS[name],
                    "status": "failed",
                    "reason": f"{type(exc).__name__}: {exc}",
                }
            results["targets"][name] = res  # type: ignore[index]
            if name in GATEWAYS and res.get("version"):
                key = {"portkey": "portkey", "litellm": "litellm"}.get(name)
                if key:
                    results["meta"]["versions"][key] = res["version"]  # type: ignore[index]
    finally:
        if sim_proc is not None:
            sim_proc.stop()
    results["meta"]["elapsed_s"] = round(time.time() - started, 1)  # type: ignore[index]
    results["derived"] = report.derive(results)
    write_outputs(results, opts, started)
    if opts.docs == "never" or (opts.docs == "auto" and not opts.full):
        print(
            f"\n(docs not updated: {'--docs never' if opts.docs == 'never' else 'partial run; pass --docs always'})"
        )
    else:
        begin, end = (
            (report.FEATURES_BEGIN, report.FEATURES_END)
            if opts.preset == "features"
            else (report.BEGIN, report.END)
        )
        report.update_docs(opts.docs_path, begin, end, report.markdown(results))
        print(f"\nupdated {opts.docs_path}")
    logs = opts.results_dir / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    shutil.copytree(work / "logs", logs, dirs_exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    return results


def write_outputs(results: dict[str, object], opts: Options, started: float) -> None:
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    md = report.markdown(results)
    for stem in (f"run-{stamp}", "latest"):
        (opts.results_dir / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
        (opts.results_dir / f"{stem}.md").write_text(md)
    print("\n" + md)
    print(f"raw results: {opts.results_dir / f'run-{stamp}.json'} (and latest.json / latest.md)")
