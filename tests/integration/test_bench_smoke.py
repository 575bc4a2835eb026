"""Smoke test of the benchmark command: it runs end to end and produces a table with numbers.

No timing is asserted (the benchmark is not part of the suite's pass/fail on speed). Only ``direct``,
``freellm`` and freellm's two response-cache rows (``freellm-cache-hit``, ``freellm-cache-miss``) are
measured, at concurrency 1 for about a second per cell, so no peer is installed. Where
wrk is missing (a CI machine may lack it) the benchmark falls back to its Python load generator on its
own; the second case forces that fallback so it is exercised even where wrk is present.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGETS = ("direct", "freellm", "freellm-cache-hit", "freellm-cache-miss")
LABELS = ("direct (simulator)", "freellm", "freellm, cache hit", "freellm, cache miss")


@pytest.mark.parametrize("loadgen", ["auto", "python"])
def test_bench_runs_end_to_end(tmp_path: Path, loadgen: str) -> None:
    results_dir = tmp_path / "results"
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "run",
        "--only",
        ",".join(TARGETS),
        "--concurrency",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--loadgen",
        loadgen,
        "--no-install",
        "--docs",
        "never",
        "--results-dir",
        str(results_dir),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, (
        f"bench failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )

    data = json.loads((results_dir / "latest.json").read_text())
    assert data["meta"]["loadgen"] in ("wrk", "python")
    if loadgen == "python":
        assert data["meta"]["loadgen"] == "python"
    for name in TARGETS:
        target = data["targets"][name]
        assert target["status"] == "ok", target
        modes = {(c["mode"], c["c"]) for c in target["cells"]}
        assert modes == {("non-stream", 1), ("stream", 1)}
        for cell in target["cells"]:
            assert "error" not in cell, cell
            assert cell["requests"] > 0 and cell["rps"] > 0 and cell["p50_ms"] > 0, cell
            if cell["mode"] == "stream":
                assert cell["ttfb_n"] > 0 and cell["ttfb_p50_ms"] > 0, cell
    assert data["targets"]["freellm"]["idle_rss_mb"] > 0
    assert data["targets"]["freellm"]["cells"][0]["added_p50_ms"] is not None
    # The cache rows did what they are named for (counts from /admin/cache/stats, not timings): after
    # the pre-measurement checks (one miss per mode) the hit row only hits; the miss row never hits.
    hit = data["targets"]["freellm-cache-hit"]["cache_stats"]
    miss = data["targets"]["freellm-cache-miss"]["cache_stats"]
    assert hit["hits"] > 0 and hit["misses"] == 2, hit
    assert miss["hits"] == 0 and miss["misses"] > 0, miss
    assert [(r["mode"], r["c"]) for r in data["derived"]["cache"]] == [("non-stream", 1), ("stream", 1)]

    table = (results_dir / "latest.md").read_text()
    label = "wrk" if data["meta"]["loadgen"] == "wrk" else "python-fallback"
    assert label in table
    rows = [
        ln
        for ln in table.splitlines()
        if ln.startswith("| ")
        and ln.split("|")[1].strip() in LABELS
        and ln.split("|")[2].strip() in ("non-stream", "stream")
    ]
    assert sorted(ln.split("|")[1].strip() for ln in rows) == sorted(LABELS * 2), table
    for row in rows:
        req_per_s = row.split("|")[4].strip()
        assert re.fullmatch(r"[\d,]+( †)?", req_per_s), row
    cache_rows = [ln for ln in table.splitlines() if ln.startswith("| | ") and ln.count("\u00d7") == 3]
    assert len(cache_rows) == 2, table  # hit ÷ miss, hit ÷ freellm, miss ÷ freellm for each mode


def _bench(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "bench", *args]
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"bench failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def test_features_preset_produces_numbers(tmp_path: Path) -> None:
    """``run --features`` on a few of its rows (no Redis needed): CPU µs per request and ratios to the
    default row come out as numbers, and the lossless row really compressed (its pre-measurement check)."""
    rows = ("direct", "freellm", "freellm-transcript", "freellm-transcript-lossless", "freellm-all-local")
    _bench(
        [
            "run",
            "--features",
            "--only",
            ",".join(rows),
            "--concurrency",
            "1",
            "--duration",
            "1",
            "--warmup",
            "0",
            "--probe-rate",
            "5",
            "--no-install",
            "--docs",
            "never",
            "--results-dir",
            str(tmp_path),
        ]
    )
    data = json.loads((tmp_path / "latest.json").read_text())
    assert data["meta"]["preset"] == "features"
    for name in rows:
        assert data["targets"][name]["status"] == "ok", data["targets"][name]
    features = data["derived"]["features"]
    got = {(r["target"], r["mode"]) for r in features}
    assert ("freellm-transcript-lossless", "stream") in got and ("freellm-all-local", "non-stream") in got
    for r in features:
        assert r["cpu_us"] and r["cpu_us"] > 0, r
        if r["target"] != "freellm":
            assert r["cpu_ratio"] and r["rps_ratio"], r
    assert (
        data["targets"]["freellm-all-local"]["cache_stats"]["hits"] == 0
    )  # a varied body: every request misses
    table = (tmp_path / "latest.md").read_text()
    assert "| features: row |" in table and "issue 3 target" not in table


def test_slow_streams_produce_numbers(tmp_path: Path) -> None:
    """``slow-streams`` on a tiny point: streams held, gaps, TTFB, RSS and fds measured, no errors."""
    _bench(
        [
            "slow-streams",
            "--only",
            "direct,freellm",
            "--streams",
            "40",
            "--gap-ms",
            "20",
            "--tokens",
            "30",
            "--hold",
            "1.5",
            "--ramp",
            "200",
            "--no-install",
            "--docs",
            "never",
            "--results-dir",
            str(tmp_path),
        ]
    )
    data = json.loads((tmp_path / "slow-latest.json").read_text())
    rows = {r["target"]: r for r in data["rows"]}
    for name in ("direct", "freellm"):
        r = rows[name]
        assert r["status"] == "ok", r
        assert r["open_min"] > 0 and r["frames"] > 0 and r["gap_p50_ms"] is not None, r
        assert r["ttfb_p50_ms"] is not None and r["fds_open"] > r["idle_fds"], r
        assert r["rss_open_mib"] > 0 and r["errors"] == 0, r
    assert rows["freellm"]["nofile"] and not rows["freellm"]["nofile"].startswith(
        "1024/"
    )  # it raised its limit
    assert "| target | streams |" in (tmp_path / "slow-latest.md").read_text()
