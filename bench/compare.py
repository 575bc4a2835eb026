"""The regression guard: a run's JSON results against a committed baseline, row by row.

Not a timed test: the suite never asserts a speed, because CI machines are shared and a timing
assertion there fails on the neighbours' load, not on the code. Instead, on a quiet machine and on
demand::

    python -m bench run --features --results-dir /tmp/r && python -m bench slow-streams --results-dir /tmp/r
    python -m bench compare bench/baseline.json /tmp/r/latest.json /tmp/r/slow-latest.json

flags every row that is more than ``--tolerance`` (25 %) worse than the baseline on one of its figures
(req/s down; CPU µs per request, p99 latency, RSS per stream or added inter-token delay up; errors
appearing) and exits 1 when one is. A row only one side has is listed, not judged. Small absolute
differences are never flagged (each figure has a floor, e.g. 0.5 ms of p99), so a 0.2 ms p99 becoming
0.3 ms is not a "50 % regression".

``--save FILE RESULTS...`` writes a baseline from one or more result files (rows of later files win),
which is how ``bench/baseline.json`` is made: from real runs, with the conditions they ran under kept in
its ``sources``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TOLERANCE = 0.25


@dataclass(frozen=True)
class Figure:
    """One figure of a row: which way is better and the smallest absolute change worth flagging."""

    key: str
    label: str
    higher_is_better: bool
    floor: float


RUN_FIGURES = (
    Figure("rps", "req/s", True, 0.0),
    Figure("cpu_us", "CPU µs/request", False, 10.0),
    Figure("p99_ms", "p99 ms", False, 0.5),
)
SLOW_FIGURES = (
    Figure("rss_per_stream_kib", "RSS KiB/stream", False, 2.0),
    Figure("added_gap_p99_ms", "added inter-token p99 ms", False, 1.0),
    Figure("ttfb_p99_ms", "TTFB p99 ms", False, 2.0),
    Figure("errors", "errors", False, 0.0),
)


def flatten(data: dict) -> tuple[dict[str, dict[str, float]], dict[str, object]]:
    """``{row id: {figure: value}}`` and a description of where they came from, for any results file:
    a ``bench run`` result, a ``bench slow-streams`` result, or a saved baseline."""
    if data.get("kind") == "baseline":
        return dict(data["rows"]), {"sources": data.get("sources", [])}
    meta = data.get("meta", {})
    source = {
        "command": meta.get("command"),
        "started_at": meta.get("started_at"),
        "versions": meta.get("versions", {}).get("freellm"),
        "loadavg_at_start": meta.get("loadavg_at_start"),
    }
    foreign = [
        float(c["foreign_cpu_pct"])
        for t in data.get("targets", {}).values()
        for c in t.get("cells", [])
        if c.get("foreign_cpu_pct") is not None
    ] + [float(r["foreign_cpu_pct"]) for r in data.get("rows", []) if r.get("foreign_cpu_pct") is not None]
    if foreign:  # how busy the machine was with other work: a baseline taken under load says so
        source["foreign_cpu_pct_avg"] = round(sum(foreign) / len(foreign), 1)
        source["foreign_cpu_pct_max"] = max(foreign)
    rows: dict[str, dict[str, float]] = {}
    if data.get("kind") == "slow-streams":
        from bench.slow import per_stream

        for r in data.get("rows", []):
            if r.get("status") != "ok":
                continue
            per_stream(r)  # RSS per stream as the current definition has it
            rid = f"slow/{r['target']}/n={r['streams']}/gap={r['gap_ms']:g}ms"
            rows[rid] = {f.key: float(r[f.key]) for f in SLOW_FIGURES if r.get(f.key) is not None}
        return rows, source
    for name, target in data.get("targets", {}).items():
        if target.get("status") != "ok":
            continue
        for cell in target.get("cells", []):
            if "error" in cell:
                continue
            rid = f"run/{name}/{cell['mode']}/c={cell['c']}"
            fig: dict[str, float] = {}
            for f in RUN_FIGURES:
                value = cpu_us(cell) if f.key == "cpu_us" else cell.get(f.key)
                if value is not None:
                    fig[f.key] = float(value)
            rows[rid] = fig
    return rows, source


def cpu_us(cell: dict) -> float | None:
    """The server's CPU µs per completed request in a cell (as :func:`bench.report.cpu_us_per_request`)."""
    pct, rps = cell.get("server_cpu_pct"), cell.get("rps")
    return None if pct is None or not rps else round(float(pct) / 100.0 / float(rps) * 1e6, 1)


def worse_by(fig: Figure, base: float, now: float) -> float | None:
    """How much worse ``now`` is than ``base`` as a fraction of ``base`` (None: not worse, or within the
    figure's absolute floor). A figure whose baseline is 0 (errors) is infinitely worse when it rises."""
    delta = (base - now) if fig.higher_is_better else (now - base)
    if delta <= fig.floor:
        return None
    if base == 0:
        return float("inf")
    return delta / abs(base)


def compare(
    baseline: dict[str, dict[str, float]], current: dict[str, dict[str, float]], tolerance: float
) -> tuple[list[dict[str, object]], list[str], list[str]]:
    """(flagged figures, rows only in the baseline, rows only in the current results)."""
    figures = {f.key: f for f in (*RUN_FIGURES, *SLOW_FIGURES)}
    flagged: list[dict[str, object]] = []
    for rid in sorted(set(baseline) & set(current)):
        for key, base in baseline[rid].items():
            now = current[rid].get(key)
            fig = figures.get(key)
            if now is None or fig is None:
                continue
            worse = worse_by(fig, base, now)
            if worse is not None and worse > tolerance:
                flagged.append(
                    {"row": rid, "figure": fig.label, "baseline": base, "now": now, "worse": worse}
                )
    return flagged, sorted(set(baseline) - set(current)), sorted(set(current) - set(baseline))


def load(paths: list[Path]) -> tuple[dict[str, dict[str, float]], list[dict[str, object]]]:
    rows: dict[str, dict[str, float]] = {}
    sources: list[dict[str, object]] = []
    for path in paths:
        got, source = flatten(json.loads(path.read_text()))
        rows.update(got)
        if "sources" in source:
            sources += source["sources"]  # type: ignore[arg-type]
        else:
            sources.append({"file": path.name, **source})
    return rows, sources


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "compare", help="flag result rows more than 25%% worse than a baseline (the regression guard)"
    )
    p.add_argument("baseline", type=Path, help="bench/baseline.json, or any results file")
    p.add_argument("results", type=Path, nargs="+", help="results JSON files (bench run, bench slow-streams)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="fraction worse that is flagged (0.25)")
    p.add_argument(
        "--save",
        action="store_true",
        help="write BASELINE from RESULTS instead of comparing (rows of later files win)",
    )


def main(args: argparse.Namespace) -> int:
    if args.save:
        rows, sources = load(args.results)
        out = {
            "kind": "baseline",
            "saved_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "note": "python -m bench compare --save; compare with: python -m bench compare THIS RESULTS...",
            "sources": sources,
            "rows": rows,
        }
        args.baseline.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")
        print(f"wrote {args.baseline}: {len(rows)} rows from {len(args.results)} file(s)")
        return 0
    base, _ = load([args.baseline])
    now, _ = load(args.results)
    flagged, gone, new = compare(base, now, args.tolerance)
    judged = len(set(base) & set(now))
    print(f"{judged} rows in both; tolerance {args.tolerance:.0%}")
    for f in flagged:
        worse = "from 0" if f["worse"] == float("inf") else f"{f['worse']:.0%} worse"
        print(f"  WORSE  {f['row']}: {f['figure']} {f['baseline']:g} -> {f['now']:g} ({worse})")
    if gone:
        print(f"  not in these results ({len(gone)}): {', '.join(gone[:12])}{' …' if len(gone) > 12 else ''}")
    if new:
        print(f"  not in the baseline ({len(new)}): {', '.join(new[:12])}{' …' if len(new) > 12 else ''}")
    print(f"{len(flagged)} figure(s) more than {args.tolerance:.0%} worse" if flagged else "no row is worse")
    return 1 if flagged else 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="python -m bench.compare")
    add_parser(parser.add_subparsers(dest="command", required=True))
    sys.exit(main(parser.parse_args(["compare", *sys.argv[1:]])))
