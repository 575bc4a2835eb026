"""The servers under test: the simulator itself, freellm, the floor proxy, LiteLLM and Portkey.

Each launcher starts its server (pinned to the server core), waits until it answers, and returns a
:class:`Running` target that says where to send a chat request and which headers it needs. Every target
is pointed at the same virtual provider of the same simulator, and every client request carries the
same JSON body, so the only difference between two rows of the table is the server in the middle.

Two rows are freellm again with its response cache on (``cache.enabled: true``, every other cache
setting at its default): ``freellm-cache-hit`` gets the same body every time, so after the first
request every answer is a hit; ``freellm-cache-miss`` gets a body made unique per request (the user
message carries :data:`bench.stats.VARY`, which every load generator replaces), so every request computes
the key, misses, goes upstream and stores its answer — and, past ``max_entries`` (5000), evicts.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench import peers
from bench.loadgen import REPO, bench_env
from bench.procs import Placement, Proc, free_port

SIM_PROVIDER = "bench"
MODEL = "model-x"
UPSTREAM_KEY = "sk-bench-upstream"
CLIENT_KEY = "sk-bench-client-0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
"""freellm's client key and LiteLLM's master key (LiteLLM refuses to start without a long one)."""

ADMIN_KEY = "sk-bench-admin-0123456789abcdef"
"""The cache rows' admin key (``/admin/cache/stats`` is read once, after their cells)."""

ALL_TARGETS = (
    "direct",
    "floor",
    "freellm",
    "freellm-cache-hit",
    "freellm-cache-miss",
    "freellm-balanced",
    "freellm-no-metrics",
    "freellm-redis",
    "freellm-session-profile",
    "freellm-transcript",
    "freellm-transcript-lossless",
    "freellm-all-local",
    "freellm-all",
    "portkey",
    "litellm",
)
FEATURE_ONLY = (
    "freellm-session-profile",
    "freellm-transcript",
    "freellm-transcript-lossless",
    "freellm-all-local",
    "freellm-all",
)
"""Rows only the features preset (``--features``) measures by default (issue 17, part 2)."""
DEFAULT_TARGETS = tuple(t for t in ALL_TARGETS if t != "freellm-redis" and t not in FEATURE_ONLY)
"""What a run measures unless ``--only``/``--state`` say otherwise (the Redis row needs a Redis server)."""
FEATURE_TARGETS = (
    "direct",
    "freellm",
    "freellm-cache-miss",
    "freellm-cache-hit",
    "freellm-balanced",
    "freellm-session-profile",
    "freellm-no-metrics",
    "freellm-redis",
    "freellm-transcript",
    "freellm-transcript-lossless",
    "freellm-all-local",
    "freellm-all",
)
"""``python -m bench run --features``: the default row and one row per feature turned on, then all of
them together; ``freellm-no-metrics`` is the A/B pair of ``freellm`` (whose metrics are on)."""
REDIS_TARGETS = ("freellm-redis", "freellm-all")
SESSION_ID = "bench-conversation-1"
"""The ``X-Session-Id`` of the session rows: one conversation, so every request after the first finds
its sticky route and records it again."""
PROFILE = "bench"
PROFILE_PROMPT = "Answer briefly, in plain English, and name the file you are talking about."
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
GATEWAYS = tuple(t for t in ALL_TARGETS if t != "direct")
"""Every target that is a proxy in front of the simulator."""
BALANCED_ROUTES = 4
"""The ``freellm-balanced`` row's chain: this many providers (one simulator path each) scored by
``routing.strategy: balanced``, so every request pays the scored order the strategy costs."""
CACHE_TARGETS = ("freellm-cache-hit", "freellm-cache-miss")
LABELS = {
    "direct": "direct (simulator)",
    "floor": "floor (bare aiohttp proxy)",
    "freellm": "freellm",
    "freellm-cache-hit": "freellm, cache hit",
    "freellm-cache-miss": "freellm, cache miss",
    "freellm-balanced": f"freellm, balanced routing ({BALANCED_ROUTES} routes)",
    "freellm-no-metrics": "freellm, metrics off",
    "freellm-redis": "freellm, hot state in Redis",
    "freellm-session-profile": "freellm, session + profile",
    "freellm-transcript": "freellm, 20k-token transcript",
    "freellm-transcript-lossless": "freellm, 20k-token transcript, lossless",
    "freellm-all-local": "freellm, everything on but Redis",
    "freellm-all": "freellm, everything on",
    "portkey": "Portkey gateway",
    "litellm": "LiteLLM proxy",
}


@dataclass
class Context:
    sim_base: str
    """``http://127.0.0.1:<port>`` of the shared simulator."""
    sim_proc: Proc
    work: Path
    """Temporary directory for configs, data dirs and logs of this run."""
    placement: Placement
    workers: int
    install: bool
    portkey_version: str = peers.PORTKEY_VERSION
    redis_url: str = DEFAULT_REDIS_URL
    """The ``freellm-redis`` row's server (each run uses its own namespace and deletes it afterwards)."""

    @property
    def upstream(self) -> str:
        return f"{self.sim_base}/{SIM_PROVIDER}/v1"


@dataclass
class Running:
    name: str
    url: str
    headers: dict[str, str]
    version: str
    proc: Proc | None
    """The gateway process (RSS is measured on it and its children); None for ``direct``."""
    startup_s: float = 0.0
    note: str = ""
    sim_pid: int | None = None
    """``direct`` only: the simulator's pid (the server under test, for CPU accounting)."""
    varied: bool = False
    """Every request gets a unique body (``freellm-cache-miss``)."""
    cache: str | None = None
    """What the pre-measurement check expects of ``X-FreeLLM-Cache``: ``"off"`` (header absent),
    ``"HIT"`` (on the second of two identical requests) or ``"MISS"``; None: not checked."""
    admin_url: str | None = None
    """``/admin/cache/stats`` of a cache row (read with :data:`ADMIN_KEY`)."""
    cleanup: Callable[[], None] | None = None
    """Run after the process stopped (the Redis row deletes its namespace)."""
    body: str = "default"
    """Which request body: ``default`` (one short user message) or ``transcript`` (bench/transcript.py)."""
    compressed: bool = False
    """The pre-measurement check wants ``X-FreeLLM-Compress: lossless; saved~=N`` with N > 0."""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
        if self.cleanup is not None:
            self.cleanup()
            self.cleanup = None


def freellm_version() -> str:
    from freellm import __version__

    rev = ""
    git = shutil.which("git")
    if git:
        import subprocess

        out = subprocess.run(
            [git, "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            [git, "-C", str(REPO), "status", "--porcelain", "--", "freellm"], capture_output=True, text=True
        )
        if out.returncode == 0:
            rev = f" ({out.stdout.strip()}{'+dirty' if dirty.stdout.strip() else ''})"
    return __version__ + rev


def start_direct(ctx: Context) -> Running:
    from freellm import __version__

    return Running(
        name="direct",
        url=f"{ctx.upstream}/chat/completions",
        headers={"Authorization": f"Bearer {UPSTREAM_KEY}"},
        version=f"freellm sim {__version__}",
        proc=None,
    )


def freellm_config(ctx: Context, port: int, data_dir: Path, extra: dict | None = None) -> dict:
    cfg: dict = {
        "server": {"host": "127.0.0.1", "port": port, "ip_rate_limit_rpm": 0, "workers": ctx.workers},
        "auth": {"api_keys": [CLIENT_KEY]},
        "storage": {"path": str(data_dir)},
        "providers": [
            {
                "name": SIM_PROVIDER,
                "kind": "openai",
                "base_url": ctx.upstream,
                "keys": [UPSTREAM_KEY],
                "models": [{"id": MODEL}],
            }
        ],
        "chain": [f"{SIM_PROVIDER}/{MODEL}"],
    }
    for k, v in (extra or {}).items():
        if isinstance(v, dict) and isinstance(cfg.get(k), dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return cfg


def freellm_argv(config_path: Path) -> list[str]:
    script = Path(sys.executable).parent / "freellm"
    if script.exists():
        return [str(script), "serve", "--config", str(config_path)]
    return [sys.executable, "-m", "freellm.cli", "serve", "--config", str(config_path)]


def launch_freellm(ctx: Context, name: str, cfg: dict, port: int) -> Proc:
    config_path = ctx.work / f"{name}.yaml"
    config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = Proc(
        name,
        freellm_argv(config_path),
        ctx.work / "logs" / f"{name}.log",
        env=bench_env(),
        cwd=REPO,
        cores=ctx.placement.server,
    ).start()
    return proc


def feature_extra(ctx: Context, name: str, namespace: str) -> dict | None:
    """The configuration a row adds to plain freellm's (None: plain freellm)."""
    cache = {"cache": {"enabled": True}, "auth": {"admin_keys": [ADMIN_KEY]}}
    redis = {"storage": {"redis_url": ctx.redis_url, "namespace": namespace}}
    profile = {
        "auth": {"api_keys": [{"key": CLIENT_KEY, "profile": PROFILE}]},
        "profiles": {PROFILE: {"system_prompt": PROFILE_PROMPT}},
    }
    lossless = {"compression": {"mode": "lossless"}}
    if name in CACHE_TARGETS:
        return cache
    if name == "freellm-balanced":
        return balanced_extra(ctx)
    if name == "freellm-no-metrics":  # the A/B row: plain freellm counts every request for /metrics
        return {"metrics": {"enabled": False}}
    if name == "freellm-redis":  # the same gateway with its hot state in Redis (issue 14's row)
        return redis
    if name == "freellm-session-profile":  # sticky sessions are on by default; the header names one
        return profile
    if name == "freellm-transcript-lossless":
        return lossless
    if name in ("freellm-all", "freellm-all-local"):
        # Every feature at once, on the default body: the cache misses and stores (a varied body: a hit
        # would skip the rest), balanced over four routes, a profile's prompt, sticky sessions, metrics
        # (on by default), compression, and (freellm-all) the hot state in Redis.
        out: dict = {
            **balanced_extra(ctx),
            **lossless,
            "cache": {"enabled": True},
            "profiles": profile["profiles"],
        }
        out["auth"] = {"api_keys": profile["auth"]["api_keys"], "admin_keys": [ADMIN_KEY]}
        if name == "freellm-all":
            out.update(redis)
        return out
    return None


def start_freellm(ctx: Context, name: str = "freellm") -> Running:
    port = free_port()
    namespace = f"bench_{os.getpid()}_{port}"
    extra = feature_extra(ctx, name, namespace)
    cached = name in CACHE_TARGETS or name in ("freellm-all", "freellm-all-local")
    cfg = freellm_config(ctx, port, ctx.work / f"{name}-data", extra)
    proc = launch_freellm(ctx, name, cfg, port)
    took = proc.ready_or_stop(f"http://127.0.0.1:{port}/health", 60)
    note = ""
    if ctx.workers > 1:
        note = f"config asks server.workers={ctx.workers}; freellm serve honours it only once multi-worker serving lands"
    headers = {"Authorization": f"Bearer {CLIENT_KEY}"}
    if name in ("freellm-session-profile", "freellm-all", "freellm-all-local"):
        headers["X-Session-Id"] = SESSION_ID
    everything = name in ("freellm-all", "freellm-all-local")
    return Running(
        name=name,
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        headers=headers,
        version=freellm_version(),
        proc=proc,
        startup_s=took,
        note=note,
        varied=name == "freellm-cache-miss" or everything,
        cache={
            "freellm": "off",
            "freellm-cache-hit": "HIT",
            "freellm-cache-miss": "MISS",
            "freellm-all": "MISS",
            "freellm-all-local": "MISS",
        }.get(name),
        admin_url=f"http://127.0.0.1:{port}/admin/cache/stats" if cached else None,
        cleanup=(lambda: drop_redis_namespace(ctx.redis_url, namespace)) if name in REDIS_TARGETS else None,
        body="transcript" if name.startswith("freellm-transcript") else "default",
        compressed=name == "freellm-transcript-lossless",
    )


def balanced_extra(ctx: Context) -> dict:
    """Four providers on the simulator (paths ``bench``, ``bench-2``…), every one serving the model,
    ordered by the ``balanced`` strategy."""
    names = [SIM_PROVIDER, *(f"{SIM_PROVIDER}-{i}" for i in range(2, BALANCED_ROUTES + 1))]
    providers = [
        {
            "name": n,
            "kind": "openai",
            "base_url": f"{ctx.sim_base}/{n}/v1",
            "keys": [UPSTREAM_KEY],
            "models": [{"id": MODEL}],
        }
        for n in names
    ]
    return {
        "providers": providers,
        "chain": [f"{n}/{MODEL}" for n in names],
        "routing": {"strategy": "balanced"},
    }


def start_freellm_balanced(ctx: Context) -> Running:
    return start_freellm(ctx, "freellm-balanced")


def drop_redis_namespace(url: str, namespace: str) -> None:
    """Delete every key of ``namespace`` (what the Redis row's gateway wrote)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    finally:
        client.close()


def start_freellm_redis(ctx: Context) -> Running:
    return start_freellm(ctx, "freellm-redis")


def start_freellm_no_metrics(ctx: Context) -> Running:
    return start_freellm(ctx, "freellm-no-metrics")


def start_freellm_cache_hit(ctx: Context) -> Running:
    return start_freellm(ctx, "freellm-cache-hit")


def start_freellm_cache_miss(ctx: Context) -> Running:
    return start_freellm(ctx, "freellm-cache-miss")


def start_floor(ctx: Context) -> Running:
    import aiohttp

    port = free_port()
    proc = Proc(
        "floor",
        [
            sys.executable,
            str(REPO / "bench" / "floor_proxy.py"),
            "--port",
            str(port),
            "--upstream",
            ctx.upstream,
        ],
        ctx.work / "logs" / "floor.log",
        env=bench_env(),
        cwd=REPO,
        cores=ctx.placement.server,
    ).start()
    took = proc.ready_or_stop(f"http://127.0.0.1:{port}/health", 30)
    return Running(
        name="floor",
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        headers={"Authorization": f"Bearer {UPSTREAM_KEY}"},
        version=f"bench/floor_proxy.py (aiohttp {aiohttp.__version__})",
        proc=proc,
        startup_s=took,
    )


def start_litellm(ctx: Context) -> Running:
    version = peers.ensure_litellm(ctx.work / "logs" / "install-litellm.log", install=ctx.install)
    port = free_port()
    cfg = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": ctx.upstream,
                    "api_key": UPSTREAM_KEY,
                },
            }
        ],
        "litellm_settings": {"telemetry": False, "drop_params": True},
        "general_settings": {"master_key": CLIENT_KEY},
    }
    config_path = ctx.work / "litellm.yaml"
    config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(
        {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the model price list at start-up
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
        }
    )
    argv = [
        str(peers.LITELLM_VENV / "bin" / "litellm"),
        "--config",
        str(config_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        str(ctx.workers),
    ]
    proc = Proc(
        "litellm", argv, ctx.work / "logs" / "litellm.log", env=env, cwd=ctx.work, cores=ctx.placement.server
    ).start()
    took = proc.ready_or_stop(f"http://127.0.0.1:{port}/health/liveliness", 180)
    return Running(
        name="litellm",
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        headers={"Authorization": f"Bearer {CLIENT_KEY}"},
        version=version,
        proc=proc,
        startup_s=took,
    )


def start_portkey(ctx: Context) -> Running:
    version = peers.ensure_portkey(
        ctx.work / "logs" / "install-portkey.log", install=ctx.install, version=ctx.portkey_version
    )
    node = shutil.which("node")
    assert node is not None
    port = free_port()
    env = dict(os.environ)
    env["NODE_ENV"] = "production"
    argv = [node, str(peers.portkey_entry()), f"--port={port}", "--headless"]
    proc = Proc(
        "portkey",
        argv,
        ctx.work / "logs" / "portkey.log",
        env=env,
        cwd=peers.NODE_DIR,
        cores=ctx.placement.server,
    ).start()
    took = proc.ready_or_stop(f"http://127.0.0.1:{port}/", 60)
    return Running(
        name="portkey",
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        headers={
            "Authorization": f"Bearer {UPSTREAM_KEY}",
            "x-portkey-provider": "openai",
            "x-portkey-custom-host": ctx.upstream,
        },
        version=version,
        proc=proc,
        startup_s=took,
    )


LAUNCHERS: dict[str, Callable[[Context], Running]] = {
    "direct": start_direct,
    "floor": start_floor,
    "freellm": start_freellm,
    "freellm-cache-hit": start_freellm_cache_hit,
    "freellm-cache-miss": start_freellm_cache_miss,
    "freellm-balanced": start_freellm_balanced,
    "freellm-no-metrics": start_freellm_no_metrics,
    "freellm-redis": start_freellm_redis,
    **{name: functools.partial(start_freellm, name=name) for name in FEATURE_ONLY},
    "portkey": start_portkey,
    "litellm": start_litellm,
}
