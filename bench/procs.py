"""Processes the benchmark starts: spawning pinned to cores, readiness, RSS sampling, clean stopping.

Every server runs in its own session (process group), so stopping it ends exactly the processes this
benchmark started (a LiteLLM parent and its workers, say) and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Placement:
    """Which cores the load side (load generator, probe, upstream simulator) and the server under test use."""

    load: frozenset[int] | None
    server: frozenset[int] | None

    @property
    def pinned(self) -> bool:
        return self.load is not None

    def describe(self) -> str:
        if not self.pinned:
            return "unpinned (fewer than 2 cores, or --no-pin): every process shares every core"
        return (
            f"load generator, TTFB probe and upstream simulator on core {_fmt(self.load)}; "
            f"the server under test (each gateway, or the simulator itself for `direct`) alone on core "
            f"{_fmt(self.server)}"
        )


def _fmt(cores: frozenset[int] | None) -> str:
    return ",".join(str(c) for c in sorted(cores or ()))


def choose_placement(no_pin: bool) -> Placement:
    if no_pin or not hasattr(os, "sched_setaffinity"):
        return Placement(None, None)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return Placement(None, None)
    return Placement(frozenset({cores[0]}), frozenset({cores[1]}))


def pinned_argv(argv: Sequence[str], cores: frozenset[int] | None) -> list[str]:
    """``taskset -c N argv...`` (taskset execs, so the pid is the server's own)."""
    if cores is None:
        return list(argv)
    taskset = shutil.which("taskset")
    if taskset:
        return [taskset, "-c", _fmt(cores), *argv]
    return list(argv)  # pin_tree() after start covers a machine without util-linux


def tree_pids(pid: int) -> list[int]:
    """``pid`` and all its descendants (via /proc/<pid>/task/<tid>/children)."""
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                text = Path(f"/proc/{p}/task/{tid}/children").read_text()
            except OSError:
                continue
            stack.extend(int(c) for c in text.split())
    return out


def pin_tree(pid: int, cores: frozenset[int] | None) -> None:
    """Move every thread of ``pid`` and its descendants to ``cores`` (like ``taskset -a -p``)."""
    if cores is None:
        return
    for p in tree_pids(pid):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        for tid in tids:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cores)


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` and its descendants (sum of VmRSS)."""
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/status", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


class RssSampler:
    """Samples a process tree's RSS in a thread while a measurement runs; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, rss_bytes(self.pid))
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.peak = max(self.peak, rss_bytes(self.pid))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StartError(RuntimeError):
    """A server did not come up; the message carries the tail of its log."""


@dataclass
class Proc:
    """A server subprocess with its log file."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    cores: frozenset[int] | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the process
        try:
            self.popen = subprocess.Popen(
                pinned_argv(self.argv, self.cores),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        finally:
            log.close()
        pin_tree(self.popen.pid, self.cores)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def ready_or_stop(self, url: str, timeout: float) -> float:
        """:meth:`wait_ready`, stopping the process when it never gets ready (or the wait is
        interrupted): a half-started server must not outlive the run."""
        try:
            return self.wait_ready(url, timeout)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, url: str, timeout: float) -> float:
        """Poll ``url`` until it answers below 500; returns the seconds it took. Raises StartError."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if not self.alive():
                code = self.popen.returncode if self.popen else None
                raise StartError(f"{self.name} exited with {code} during start-up:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=1.0) as resp:
                    if resp.status < 500:
                        return time.monotonic() - start
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    return time.monotonic() - start
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise StartError(f"{self.name} not ready at {url} after {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group this benchmark created, then SIGKILL it after ``grace`` seconds."""
        if self.popen is None or self.popen.returncode is not None:
            return
        pgid = self.popen.pid  # start_new_session: the group id is the leader's pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self.popen.wait(5)
        # Workers that outlived their parent (same group) get the same end.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _system_busy_ticks() -> int:
    """Ticks the whole machine spent running processes: user + nice + system from /proc/stat.

    irq/softirq time (loopback packet processing, largely caused by the benchmark itself but not charged
    to any process) and steal are left out, so an idle machine reads close to 0 here.
    """
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[0] + fields[1] + fields[2]


def _own_ticks() -> int:
    """CPU ticks used by this process and everything it started (living, or reaped: cutime/cstime)."""
    total = 0
    for p in tree_pids(os.getpid()):
        try:
            with open(f"/proc/{p}/stat", encoding="ascii", errors="replace") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after "pid (comm)": state=0 … utime=11 stime=12 cutime=13 cstime=14
        total += sum(int(x) for x in rest[11:15])
    return total


class ForeignCpu:
    """How much CPU processes *not* started by this benchmark used over an interval (% of one core).

    The benchmark shares a small machine; another workload running at the same time skews every number.
    This does not prevent it, it makes it visible in the results.
    """

    def __init__(self) -> None:
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.pct: float | None = None

    def __enter__(self) -> ForeignCpu:
        self._t0 = time.monotonic()
        try:
            self._sys0, self._own0 = _system_busy_ticks(), _own_ticks()
        except OSError:
            self._sys0 = -1
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sys0 < 0:
            return
        try:
            sys1, own1 = _system_busy_ticks(), _own_ticks()
        except OSError:
            return
        elapsed = time.monotonic() - self._t0
        if elapsed <= 0:
            return
        foreign = max(0, (sys1 - self._sys0) - (own1 - self._own0))
        self.pct = round(100.0 * foreign / self.hz / elapsed, 1)


def raise_priority(nice: int) -> str:
    """Lower this process's nice value (children inherit it), so other work on a shared machine takes
    less CPU from the measurement. Needs root (or CAP_SYS_NICE); returns what was done, for the notes."""
    if nice >= 0 or not hasattr(os, "setpriority"):
        return "default priority"
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as exc:
        return f"default priority (nice {nice} not permitted: {exc.strerror})"
    return f"nice {nice} for every benchmark process"


def _tree_ticks(pid: int) -> int:
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/stat", encoding="ascii", errors="replace") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(x) for x in rest[11:15])
    return total


def _core_ticks(core: int) -> tuple[int, int]:
    """(busy, total) ticks of one core from /proc/stat; busy excludes idle and iowait."""
    with open("/proc/stat", encoding="ascii") as f:
        for line in f:
            if line.startswith(f"cpu{core} "):
                fields = [int(x) for x in line.split()[1:]]
                total = sum(fields[:8])
                return total - fields[3] - fields[4], total
    raise OSError(f"cpu{core} not in /proc/stat")


class CellCpu:
    """CPU use during a cell: the server under test (% of one core) and how busy the load core was.

    A server near 100 % is the bottleneck of its row; a load core near 100 % with the server below it
    means the load side (wrk + simulator) bounded the row instead.
    """

    def __init__(self, server_pid: int | None, load_cores: frozenset[int] | None) -> None:
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.server_pid = server_pid
        self.load_core = min(load_cores) if load_cores else None
        self.server_pct: float | None = None
        self.load_core_pct: float | None = None

    def __enter__(self) -> CellCpu:
        self._t0 = time.monotonic()
        self._srv0 = _tree_ticks(self.server_pid) if self.server_pid else 0
        self._core0 = _core_ticks(self.load_core) if self.load_core is not None else (0, 0)
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = time.monotonic() - self._t0
        if elapsed <= 0:
            return
        if self.server_pid:
            self.server_pct = round(
                100.0 * (_tree_ticks(self.server_pid) - self._srv0) / self.hz / elapsed, 1
            )
        if self.load_core is not None:
            busy, total = _core_ticks(self.load_core)
            if total > self._core0[1]:
                self.load_core_pct = round(100.0 * (busy - self._core0[0]) / (total - self._core0[1]), 1)
