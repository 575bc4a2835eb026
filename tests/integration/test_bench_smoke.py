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
