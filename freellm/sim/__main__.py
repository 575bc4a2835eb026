"""``python -m freellm.sim``: the same options as ``freellm sim``, for use before the CLI exists."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable

from freellm.sim.server import run_sim_forever
from freellm.sim.settings import SimConfigError, build_sim_settings


def main(argv: list[str] | None = None) -> int:
    """Parse options, build settings and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m freellm.sim", description="freellm upstream simulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--chunks", type=int, default=None, help="content chunks per answer (default 3)")
    parser.add_argument("--chunk-delay-ms", type=float, default=None, help="delay between chunks")
    parser.add_argument("--scenario-file", default=None, help="YAML/JSON: default, models, per_model")
    args = parser.parse_args(argv)
    try:
        settings = build_sim_settings(args.scenario_file, args.chunks, args.chunk_delay_ms)
    except SimConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"freellm sim on http://{args.host}:{args.port}/<provider>/v1 (Ctrl-C to stop)", flush=True)
    loop_factory: Callable[[], asyncio.AbstractEventLoop]
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        loop_factory = asyncio.new_event_loop
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(run_sim_forever(args.host, args.port, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
