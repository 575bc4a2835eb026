"""``python -m tests.reliability.report``: run every fault profile (the full form, 30 s each, unless
``--seconds`` says otherwise) and write the table of figures into docs/reliability.md between its
markers.

Exits 1 when a figure that must be zero is not, so the same command is the suite's full form in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from tests.harness import BackgroundLoop
from tests.reliability.profiles import PROFILES
from tests.reliability.runner import CONCURRENCY, DRAIN_DEADLINE_S, FULL_S, Figures, run_profile

REPO: Final = Path(__file__).resolve().parents[2]
DOC: Final = REPO / "docs" / "reliability.md"
BEGIN: Final = "<!-- reliability:table:begin -->"
END: Final = "<!-- reliability:table:end -->"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _sound(fig: Figures) -> bool:
    zero = (
        fig.client_failures,
        fig.unterminated,
        fig.sim_in_flight,
        fig.upstream_checked_out,
        fig.orphan_connections,
        fig.leases,
    )
    return zero == (0, 0, 0, 0, 0, 0)


def table(figs: list[Figures], seconds: float) -> str:
    """The markdown block written between the markers."""
    titles = {p.name: p.title for p in PROFILES}
    lines = [
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on commit {_commit()} with "
        f"`python -m tests.reliability.report --seconds {seconds:g}`: {seconds:g} s of load per profile, "
        f"{CONCURRENCY} concurrent clients rotating over chat, Messages, Responses and Gemini, stream and "
        f"non-stream; gateway, simulator and clients in one process on {platform.machine()} "
        f"({_cores()} cores), Python {platform.python_version()}.",
        "",
        "| profile | fault on `flaky` | requests | req/s | ok | ended in-band (post-commit) | "
        "client-visible failures | post-commit not in-band | upstream requests open | pool connections "
        "checked out | orphaned connections | leases held | p50 ms | p99 ms | added p99 ms |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for f in figs:
        added = "—" if f.added_p99_ms is None else f"{f.added_p99_ms:+,.0f}"
        lines.append(
            f"| `{f.profile}` | {titles[f.profile]} | {f.requests:,} | {f.req_per_s:,.0f} | {f.ok:,} | "
            f"{f.in_band:,} | **{f.client_failures}** | **{f.unterminated}** | **{f.sim_in_flight}** | "
            f"**{f.upstream_checked_out}** | **{f.orphan_connections}** | **{f.leases}** | {f.p50_ms:,.0f} | {f.p99_ms:,.0f} | {added} |"
        )
    lines += [
        "",
        f"Open requests, checked-out and orphaned connections and leases are read {DRAIN_DEADLINE_S:g} s after the last "
        "client got its answer (they must be 0; every run read 0 within "
        f"{max(DRAIN_DEADLINE_S if f.drained_after_s is None else f.drained_after_s for f in figs) * 1000:.0f} ms). Added p99 is the "
        "profile's p99 minus the baseline's. Verdict: "
        + (
            "**every figure that must be 0 is 0.**"
            if all(_sound(f) for f in figs)
            else "**FAILED** (see the bold cells)."
        ),
    ]
    return "\n".join(lines) + "\n"


def _cores() -> int:
    return os.cpu_count() or 1


def update_doc(body: str, path: Path = DOC) -> None:
    """Replace the text between the markers (appending them if absent)."""
    text = path.read_text() if path.exists() else ""
    block = f"{BEGIN}\n{body.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.report", description=__doc__)
    parser.add_argument(
        "--seconds", type=float, default=FULL_S, help=f"load per profile (default {FULL_S:g})"
    )
    parser.add_argument("--only", default="", help="comma-separated profile names (baseline always runs)")
    parser.add_argument("--no-docs", action="store_true", help="print the table, leave docs/reliability.md")
    args = parser.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    bg = BackgroundLoop()
    figs: list[Figures] = []
    try:
        for p in PROFILES:
            if only and p.name != "baseline" and p.name not in only:
                continue
            with tempfile.TemporaryDirectory(prefix=f"freellm-rel-{p.name}-") as tmp:
                fig = run_profile(bg, p, Path(tmp), args.seconds)
            if figs:
                fig.added_p99_ms = round(fig.p99_ms - figs[0].p99_ms, 1)
            figs.append(fig)
            print(json.dumps({k: v for k, v in fig.as_dict().items() if k != "examples"}), flush=True)
            for example in fig.examples:
                print("   ", example, flush=True)
    finally:
        bg.close()
    body = table(figs, args.seconds)
    print("\n" + body)
    if not args.no_docs:
        update_doc(body)
        print(f"updated {DOC}")
    return 0 if all(_sound(f) for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
