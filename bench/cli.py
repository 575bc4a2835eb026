"""``python -m bench run | soak | install-peers`` (run it from the repository root)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench.targets import ALL_TARGETS, DEFAULT_REDIS_URL, DEFAULT_TARGETS, FEATURE_TARGETS

DEFAULT_CONCURRENCY = [1, 16, 64]
FEATURES_CONCURRENCY = [1, 64]
"""``--features``: CPU per request is what its table compares, and c=16 adds little to c=1 and c=64."""


def _int_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not out or any(c < 1 for c in out):
        raise argparse.ArgumentTypeError("concurrency values must be ≥ 1")
    return out


def _targets(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in out if x not in ALL_TARGETS]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"unknown target(s) {bad}; choose from {', '.join(ALL_TARGETS)}")
    return out


def _modes(text: str) -> list[str]:
    out = [x.strip() for x in text.split(",") if x.strip()]
    if not out or any(x not in ("non-stream", "stream") for x in out):
        raise argparse.ArgumentTypeError("modes: non-stream, stream")
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="freellm's benchmark (docs/benchmarks.md)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="measure direct, floor, freellm, Portkey and LiteLLM side by side")
    run.add_argument("--quick", action="store_true", help="2 s per cell, 0.5 s warm-up")
    run.add_argument("--duration", type=float, help="seconds per cell (default 10)")
    run.add_argument("--warmup", type=float, help="seconds of warm-up load before each cell (default 1)")
    run.add_argument("--concurrency", type=_int_list, default=None, help="e.g. 1,16,64 (the default)")
    run.add_argument("--only", type=_targets, default=None, help=f"subset of {','.join(ALL_TARGETS)}")
    run.add_argument("--modes", type=_modes, default=None, help="non-stream,stream (the default)")
    run.add_argument("--chunks", type=int, default=20, help="content chunks per streamed answer (default 20)")
    run.add_argument(
        "--chunk-delay-ms", type=float, default=0.0, help="simulator delay between chunks (default 0)"
    )
    run.add_argument("--workers", type=int, default=1, help="worker processes per gateway (default 1)")
    run.add_argument(
        "--state",
        choices=["local", "redis"],
        default="local",
        help="redis: also measure freellm with its hot state in Redis (the freellm-redis row)",
    )
    run.add_argument(
        "--redis-url", default=DEFAULT_REDIS_URL, help=f"for --state redis (default {DEFAULT_REDIS_URL})"
    )
    run.add_argument(
        "--loadgen", choices=["auto", "wrk", "python"], default="auto", help="auto: wrk if installed"
    )
    run.add_argument(
        "--probe-rate", type=float, default=10.0, help="TTFB probe req/s under load (default 10)"
    )
    run.add_argument(
        "--portkey-version",
        default=None,
        help="@portkey-ai/gateway release (default 1.9.8; @hono/node-server held at 1.13.8)",
    )
    run.add_argument(
        "--no-install", action="store_true", help="do not install missing peers; report them unavailable"
    )
    run.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="wait up to S seconds for other processes to go quiet first",
    )
    run.add_argument(
        "--nice",
        type=int,
        default=-10,
        help="nice value for all benchmark processes (default -10; 0 = leave)",
    )
    run.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    run.add_argument(
        "--results-dir", type=Path, default=None, help="where raw JSON/Markdown go (bench/results)"
    )
    run.add_argument(
        "--docs",
        choices=["auto", "always", "never"],
        default="auto",
        help="update docs/benchmarks.md: auto = only for a full default run",
    )
    run.add_argument(
        "--features",
        action="store_true",
        help="the features preset: one freellm row per feature on, then all together (docs: features table)",
    )
    run.add_argument(
        "--soak", action="store_true", help="run the soak instead (same as `python -m bench soak`)"
    )
    _soak_args(run)

    soak = sub.add_parser("soak", help="mixed traffic through freellm with a failing provider; RSS over time")
    _soak_args(soak)
    soak.add_argument("--no-pin", action="store_true")
    soak.add_argument("--results-dir", type=Path, default=None)
    soak.add_argument("--docs", choices=["auto", "always", "never"], default="auto")
    soak.add_argument("--chunks", type=int, default=20)

    from bench import compare, slow

    slow.add_parser(sub)
    compare.add_parser(sub)
    inst = sub.add_parser(
        "install-peers", help="install LiteLLM and Portkey under bench/ (run does it on demand)"
    )
    inst.add_argument("--only", type=_targets, default=["litellm", "portkey"])
    return parser


def _soak_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--soak-duration", type=float, default=1800.0, help="seconds (default 1800)")
    p.add_argument("--soak-interval", type=float, default=5.0, help="seconds between samples (default 5)")
    p.add_argument(
        "--soak-concurrency", type=int, default=16, help="concurrent client connections (default 16)"
    )
    p.add_argument(
        "--soak-fail-rate", type=float, default=0.2, help="share of requests the flaky provider fails"
    )
    p.add_argument(
        "--soak-hangup-rate",
        type=float,
        default=0.1,
        help="share of streams whose client hangs up after the first frame (default 0.1)",
    )


def _with_state(targets: list[str], state: str) -> list[str]:
    """``--state redis`` adds the Redis row, in its place in :data:`ALL_TARGETS` order."""
    if state != "redis" or "freellm-redis" in targets:
        return targets
    wanted = set(targets) | {"freellm-redis"}
    return [t for t in ALL_TARGETS if t in wanted]


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(raw)
    command = "python -m bench " + " ".join(shlex.quote(a) for a in raw)
    if args.command == "install-peers":
        return _install_peers(args.only)
    if args.command in ("slow-streams", "compare"):
        from bench import compare, slow

        return slow.main(args, command) if args.command == "slow-streams" else compare.main(args)
    if args.command == "soak" or args.soak:
        from bench import soak

        return soak.run_soak(
            soak.SoakOptions(
                duration=args.soak_duration,
                interval=args.soak_interval,
                concurrency=args.soak_concurrency,
                fail_rate=args.soak_fail_rate,
                hangup_rate=args.soak_hangup_rate,
                chunks=args.chunks,
                no_pin=args.no_pin,
                docs=args.docs,
                command=command,
                **({"results_dir": args.results_dir} if args.results_dir else {}),
            )
        )
    from bench.runner import Options, run

    duration = args.duration if args.duration is not None else (2.0 if args.quick else 10.0)
    warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 1.0)
    default_c = FEATURES_CONCURRENCY if args.features else DEFAULT_CONCURRENCY
    full = (
        args.only is None
        and args.modes is None
        and args.concurrency in (None, default_c)
        and not args.quick
        and args.duration in (None, 10.0)
        and args.loadgen != "python"
        and args.chunks == 20
        and not args.chunk_delay_ms
        and args.portkey_version is None
        and args.state == "local"
    )
    opts = Options(
        duration=duration,
        warmup=warmup,
        concurrency=args.concurrency or list(default_c),
        targets=_with_state(
            args.only or list(FEATURE_TARGETS if args.features else DEFAULT_TARGETS), args.state
        ),
        preset="features" if args.features else "default",
        redis_url=args.redis_url,
        modes=args.modes or ["non-stream", "stream"],
        chunks=args.chunks,
        chunk_delay_ms=args.chunk_delay_ms,
        workers=args.workers,
        loadgen=args.loadgen,
        probe_rate=args.probe_rate,
        install=not args.no_install,
        no_pin=args.no_pin,
        docs=args.docs,
        command=command,
        full=full,
        wait_idle=args.wait_idle,
        nice=args.nice,
        **({"portkey_version": args.portkey_version} if args.portkey_version else {}),
        **({"results_dir": args.results_dir} if args.results_dir else {}),
    )
    results = run(opts)
    bad = [n for n, t in results["targets"].items() if t["status"] == "failed"]  # type: ignore[union-attr]
    return 1 if bad else 0


def _install_peers(names: list[str]) -> int:
    from bench import peers
    from bench.loadgen import REPO

    log = REPO / "bench" / "results" / "install.log"
    rc = 0
    for name in names:
        try:
            if name == "litellm":
                print(f"LiteLLM {peers.ensure_litellm(log)} in {peers.LITELLM_VENV}")
            elif name == "portkey":
                print(f"Portkey {peers.ensure_portkey(log)} in {peers.NODE_DIR}")
        except peers.Unavailable as exc:
            print(f"{name}: unavailable: {exc}")
            rc = 1
    return rc
