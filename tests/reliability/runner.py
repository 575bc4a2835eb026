"""Run one fault profile: a simulator (and, for some profiles, a second one as its own process), a
gateway on loopback, 64 concurrent clients for a while, then the after-load checks.

The servers run on the harness's background loop; the clients run on their own loop in the calling
thread, so a slow client never holds up the gateway's loop and the other way round. What is measured
after the load, within one second: simulator requests still being answered, upstream connections the
gateway's pool still has checked out, connections open on the simulator's side that the pool does not
hold, and leases the gateway's store still holds.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import orjson

from freellm.config import Settings
from freellm.sim import SimServer, start_sim
from freellm.sim.control import SimControl, SimControlError
from freellm.sim.keys import SIM_STATE
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, free_port, start_gateway
from tests.reliability.client import CALLS, Result, Verdict, run_call
from tests.reliability.profiles import FIRST_BYTE_TIMEOUT_S, HEALTHY, STEADY_FIRST_BYTE_TIMEOUT_S, Profile

__all__ = ["CONCURRENCY", "DRAIN_DEADLINE_S", "Figures", "SimProcess", "bounded", "run_profile"]

CONCURRENCY: Final = 64
DRAIN_DEADLINE_S: Final = 1.0
"""The after-load checks must read zero within this long after the last client got its answer."""
BOUNDED_S: Final = 3.0
FULL_S: Final = 30.0
MODEL: Final = "model-x"


def bounded() -> float:
    """Seconds of load per profile: ``FREELLM_RELIABILITY=full`` runs the full form (30 s),
    ``FREELLM_RELIABILITY_SECONDS=N`` any length, otherwise the bounded form of the normal test run."""
    seconds = os.environ.get("FREELLM_RELIABILITY_SECONDS")
    if seconds:
        return float(seconds)
    return FULL_S if os.environ.get("FREELLM_RELIABILITY") == "full" else BOUNDED_S


@dataclass
class Figures:
    """What one profile's run recorded (the row of docs/reliability.md)."""

    profile: str
    duration_s: float
    requests: int = 0
    ok: int = 0
    in_band: int = 0
    """Streams that died after the commit point and were ended in-band (expected, not failures)."""
    client_failures: int = 0
    hung_up: int = 0
    """Streams whose client hung up on purpose (``client_hang_up``)."""
    unterminated: int = 0
    """Streams that died after the commit point without the surface's in-band error and terminator."""
    failed_over: int = 0
    via_flaky: int = 0
    via_flaky_after_restart: int = 0
    """``killed_restarted``: answers from ``flaky`` that ended after its restart (recovery)."""
    sim_in_flight: int = 0
    upstream_checked_out: int = 0
    leases: int = 0
    orphan_connections: int = 0
    """Connections open on the simulator's side that the gateway's pool does not hold."""
    drained_after_s: float | None = None
    """How long after the load the three counts read zero (None: not within the deadline)."""
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    added_p99_ms: float | None = None
    req_per_s: float = 0.0
    examples: list[str] = field(default_factory=list)
    """A few failure details, for the assertion message."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def tally(
    profile: Profile, results: list[Result], duration_s: float, restarted_at: float | None = None
) -> Figures:
    """Count ``results`` into figures; an in-band end counts as a client failure unless the profile's
    fault can land after the commit point."""
    fig = Figures(profile.name, duration_s, requests=len(results))
    for r in results:
        if r.verdict is Verdict.OK:
            fig.ok += 1
        elif r.verdict is Verdict.HUNG_UP:
            fig.hung_up += 1
        elif r.verdict is Verdict.IN_BAND and profile.post_commit:
            fig.in_band += 1
        elif r.verdict is Verdict.UNTERMINATED:
            fig.unterminated += 1
        else:
            fig.client_failures += 1
        failure = r.verdict is Verdict.UNTERMINATED or r.verdict is Verdict.FAILED
        failure = failure or (r.verdict is Verdict.IN_BAND and not profile.post_commit)
        if failure and len(fig.examples) < 5:
            fig.examples.append(f"{r.call.surface} stream={r.call.stream} {r.verdict}: {r.detail}")
        fig.failed_over += r.failed_over
        by_flaky = r.routed_via.startswith("flaky/")
        fig.via_flaky += by_flaky
        # Ended after the restart and answered by flaky: the old process was dead by then, so the new one.
        after = restarted_at is not None and r.started_at + r.latency_s > restarted_at
        fig.via_flaky_after_restart += by_flaky and after
    latencies = [r.latency_s * 1000 for r in results]
    fig.p50_ms = round(_percentile(latencies, 0.50), 1)
    fig.p99_ms = round(_percentile(latencies, 0.99), 1)
    fig.req_per_s = round(len(results) / duration_s, 1)
    return fig


class SimProcess:
    """A simulator in its own process (``python -m freellm.sim``), so a profile can SIGKILL it."""

    def __init__(self, port: int, scenario_file: Path) -> None:
        self.port = port
        self._scenario_file = scenario_file
        self.base_url = f"http://127.0.0.1:{port}"
        self.control = SimControl(self.base_url, timeout=2.0)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, ready_within_s: float = 15.0) -> None:
        """Start it and return once its control API answers. The suite's healthy default comes from a
        scenario file, so it holds from the first request the process accepts: set through the control
        API after start-up, a gateway request could slip in first and get the stock answer."""
        self._scenario_file.write_bytes(orjson.dumps({"default": HEALTHY}))
        cmd = [
            sys.executable,
            "-m",
            "freellm.sim",
            "--port",
            str(self.port),
            "--scenario-file",
            str(self._scenario_file),
        ]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + ready_within_s
        while True:
            try:
                self.control.connections()
                return
            except (OSError, SimControlError):
                # Not listening yet: a process start has no event to wait on, so poll briefly.
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the simulator on port {self.port} did not start") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, the kernel closes every connection at once."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


@dataclass
class _Deadline:
    """When the clients stop sending; a fault's schedule may hold it open and push it back (see
    :func:`_kill_and_restart`)."""

    at: float
    held: bool = False

    def passed(self) -> bool:
        return not self.held and time.monotonic() >= self.at

    def extend(self, seconds: float) -> None:
        self.at = max(self.at, time.monotonic() + seconds)


Chaos = Callable[[_Deadline], Awaitable[None]]


async def _load(
    base_url: str,
    duration_s: float,
    concurrency: int,
    chaos: Chaos | None,
    hang_up: bool = False,
) -> list[Result]:
    """``concurrency`` clients, each sending the next of the eight calls as soon as its last one ended;
    with ``hang_up`` every other stream is dropped after its first content."""
    results: list[Result] = []
    seq = itertools.count()
    deadline = _Deadline(time.monotonic() + duration_s)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:

        async def client() -> None:
            while not deadline.passed():
                i = next(seq)
                call = CALLS[i % len(CALLS)]
                drop = hang_up and call.stream and (i // len(CALLS)) % 2 == 0
                results.append(await run_call(http, base_url, call, marker=f"#{i}", hang_up=drop))

        jobs: list[Awaitable[Any]] = [client() for _ in range(concurrency)]
        if chaos is not None:
            jobs.append(chaos(deadline))
        await asyncio.gather(*jobs)
    return results


def _settings(data_dir: Path, providers: dict[str, str], stall_timeout_s: float) -> Settings:
    """A gateway over ``providers`` (name → base URL) in that order, with the local cooldown and the
    model bench off so every request meets the first route's fault. ``flaky`` gets a short first-byte
    timeout (its faults include silence), ``steady`` a generous one."""
    first_byte = {"flaky": FIRST_BYTE_TIMEOUT_S, "steady": STEADY_FIRST_BYTE_TIMEOUT_S}
    return Settings.model_validate(
        {
            "auth": {"api_keys": [CLIENT_KEY]},
            "storage": {"path": str(data_dir)},
            "server": {"ip_rate_limit_rpm": 0},
            "providers": [
                {
                    "name": name,
                    "kind": "openai",
                    "base_url": url,
                    "keys": [f"{name}-key"],
                    "models": [{"id": MODEL}],
                    "timeout_s": first_byte[name],
                }
                for name, url in providers.items()
            ],
            "chain": [f"{name}/{MODEL}" for name in providers],
            "fallback": {"cooldown_local_s": 0, "model_bench_failures": 0},
            "stream": {"stall_timeout_s": stall_timeout_s},
        }
    )


@dataclass(frozen=True, slots=True)
class _Counts:
    in_flight: int
    """Requests the simulator(s) are still answering."""
    checked_out: int
    """Connections checked out of the gateway's upstream pool."""
    leases: int
    orphans: int
    """Connections the simulator(s) hold open that the gateway's pool does not know of (neither idle nor
    checked out): a connection the gateway dropped without closing it."""

    @property
    def clear(self) -> bool:
        return self.in_flight == self.checked_out == self.leases == self.orphans == 0


async def _gateway_counts(gw: GatewayServer, sim: SimServer) -> tuple[int, int, int, int, int]:
    """On the servers' loop: the simulator's requests in flight and open connections, the gateway's
    pool (checked out, total) and the leases its store holds."""
    connector = gw.state.session.connector
    checked_out = 0 if connector is None else len(connector._acquired)
    idle = 0 if connector is None else sum(len(q) for q in connector._conns.values())
    state = sim.app[SIM_STATE]
    sim_open = 0 if state.transport is None else len(state.transport.connections)
    leases = await gw.state.store.lease_count()
    return state.in_flight, sim_open, checked_out, checked_out + idle, leases


def _counts(gw: GatewayServer, sim: SimServer, proc: SimProcess | None) -> _Counts:
    in_flight, sim_open, checked_out, pooled, leases = gw.run(_gateway_counts(gw, sim))
    if proc is not None:
        remote = proc.control.connections()
        in_flight += int(remote["in_flight"] or 0)
        sim_open += max(0, int(remote["open_connections"] or 0) - 1)  # less the one asking
    return _Counts(in_flight, checked_out, leases, max(0, sim_open - pooled))


def _drain(fig: Figures, gw: GatewayServer, sim: SimServer, proc: SimProcess | None) -> None:
    """Poll the counts until they are all zero or :data:`DRAIN_DEADLINE_S` has passed; record the last
    reading. Polling is the only way here: nothing signals "the last connection went back"."""
    start = time.monotonic()
    while True:
        counts = _counts(gw, sim, proc)
        elapsed = time.monotonic() - start
        fig.sim_in_flight, fig.upstream_checked_out = counts.in_flight, counts.checked_out
        fig.leases, fig.orphan_connections = counts.leases, counts.orphans
        if counts.clear:
            fig.drained_after_s = round(elapsed, 3)
            return
        if elapsed >= DRAIN_DEADLINE_S:
            return
        time.sleep(0.01)


def run_profile(
    bg: BackgroundLoop, profile: Profile, data_dir: Path, duration_s: float, concurrency: int = CONCURRENCY
) -> Figures:
    """Run ``profile`` for ``duration_s`` seconds of load and return its figures."""
    sim = bg.run(start_sim())
    proc: SimProcess | None = None
    try:
        ctl = SimControl(sim.base_url)
        ctl.set_default(HEALTHY)
        providers = {"flaky": sim.provider_url("flaky"), "steady": sim.provider_url("steady")}
        chaos: Chaos | None = None
        restarts: list[float] = []
        if profile.kind == "baseline":
            del providers["flaky"]
            if profile.scenario:
                ctl.set_default(profile.scenario, provider="steady")
        elif profile.kind == "scripted":
            ctl.script("flaky", profile.scenario, times=None)
        elif profile.kind == "refused":
            providers["flaky"] = f"http://127.0.0.1:{free_port()}/flaky/v1"
        else:
            data_dir.mkdir(parents=True, exist_ok=True)
            proc = SimProcess(free_port(), data_dir / "flaky-sim.json")
            proc.start()
            providers["flaky"] = f"{proc.base_url}/flaky/v1"
            chaos = _kill_and_restart(proc, duration_s, restarts)
        gw = start_gateway(bg, _settings(data_dir, providers, profile.stall_timeout_s))
        try:
            results = asyncio.run(_load(gw.base_url, duration_s, concurrency, chaos, profile.hang_up))
            fig = tally(profile, results, duration_s, restarts[0] if restarts else None)
            _drain(fig, gw, sim, proc)
        finally:
            gw.close()
    finally:
        if proc is not None:
            proc.kill()
        bg.run(sim.close())
    return fig


def _kill_and_restart(proc: SimProcess, duration_s: float, restarts: list[float]) -> Chaos:
    """The killed-and-restarted fault's schedule: SIGKILL at 1/3 of the load, the restart at 2/3 (the
    sleeps are the fault's timing, not synchronisation). A process takes a while to start on a busy
    machine, so the load then goes on for at least another third after the restarted process answers,
    and ``restarts`` gets that moment (``time.perf_counter()``)."""

    async def chaos(deadline: _Deadline) -> None:
        deadline.held = True
        try:
            await asyncio.sleep(duration_s / 3)
            await asyncio.to_thread(proc.kill)
            await asyncio.sleep(duration_s / 3)
            await asyncio.to_thread(proc.start)
            restarts.append(time.perf_counter())
            deadline.extend(max(1.0, duration_s / 3))
        finally:
            deadline.held = False

    return chaos
