"""bench/compare.py, the regression guard: which rows it flags (no benchmark is run)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import compare


def run_result(rps: float, cpu_pct: float, p99: float) -> dict[str, object]:
    cell = {"mode": "non-stream", "c": 64, "rps": rps, "server_cpu_pct": cpu_pct, "p99_ms": p99}
    return {
        "meta": {"command": "python -m bench run"},
        "targets": {"freellm": {"status": "ok", "cells": [cell]}},
    }


def slow_result(kib: float, added_p99: float, errors: int) -> dict[str, object]:
    row = {
        "target": "freellm",
        "streams": 5000,
        "gap_ms": 40.0,
        "status": "ok",
        "rss_per_stream_kib": kib,
        "added_gap_p99_ms": added_p99,
        "ttfb_p99_ms": 20.0,
        "errors": errors,
    }
    return {"kind": "slow-streams", "meta": {}, "rows": [row]}


def rows(data: dict[str, object]) -> dict[str, dict[str, float]]:
    return compare.flatten(data)[0]


def test_flat_rows_and_cpu_per_request() -> None:
    got = rows(run_result(4000.0, 100.0, 20.0))
    assert got == {"run/freellm/non-stream/c=64": {"rps": 4000.0, "cpu_us": 250.0, "p99_ms": 20.0}}
    assert list(rows(slow_result(20.0, 3.0, 0))) == ["slow/freellm/n=5000/gap=40ms"]


def test_within_tolerance_is_not_flagged() -> None:
    # 20 % fewer req/s at 80 % of the CPU: the same µs per request; p99 +20 %
    flagged, _, _ = compare.compare(rows(run_result(4000, 100, 20)), rows(run_result(3200, 80, 24)), 0.25)
    assert flagged == []


def test_more_than_25_percent_worse_is_flagged() -> None:
    base = rows(run_result(4000, 100, 20))
    flagged, _, _ = compare.compare(base, rows(run_result(2900, 100, 20)), 0.25)
    assert {f["figure"] for f in flagged} == {"req/s", "CPU µs/request"}
    flagged, _, _ = compare.compare(base, rows(run_result(4000, 100, 26)), 0.25)
    assert [f["figure"] for f in flagged] == ["p99 ms"]


def test_small_absolute_changes_and_new_errors() -> None:
    base = rows(slow_result(4.0, 0.4, 0))
    flagged, _, _ = compare.compare(base, rows(slow_result(5.5, 1.2, 0)), 0.25)
    assert flagged == []  # +1.5 KiB and +0.8 ms are under the figures' floors
    flagged, _, _ = compare.compare(base, rows(slow_result(4.0, 0.4, 3)), 0.25)
    assert [f["figure"] for f in flagged] == ["errors"]


def test_cli_save_then_compare(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(run_result(4000, 100, 20)))
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(slow_result(20, 3, 0)))
    baseline = tmp_path / "baseline.json"
    ns = argparse.Namespace(baseline=baseline, results=[run, slow], tolerance=0.25, save=True)
    assert compare.main(ns) == 0
    assert len(json.loads(baseline.read_text())["rows"]) == 2
    ns.save = False
    assert compare.main(ns) == 0
    worse = tmp_path / "worse.json"
    worse.write_text(json.dumps(run_result(2000, 100, 20)))
    ns.results = [worse]
    assert compare.main(ns) == 1
