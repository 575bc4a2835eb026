"""Turning raw results into derived figures, the Markdown table, and the docs section."""

from __future__ import annotations

from pathlib import Path

from bench.targets import ALL_TARGETS, LABELS

BEGIN = "<!-- bench:results:begin -->"
END = "<!-- bench:results:end -->"
FEATURES_BEGIN = "<!-- bench:features:begin -->"
FEATURES_END = "<!-- bench:features:end -->"
SOAK_BEGIN = "<!-- bench:soak:begin -->"
SOAK_END = "<!-- bench:soak:end -->"

# The targets (issue 3, item 4).
GOAL_ADDED_MS = 1.0
GOAL_VS_LITELLM = 20.0
GOAL_VS_PORTKEY = 2.0
GOAL_VS_FLOOR = 0.5
GOAL_IDLE_RSS_MB = 80.0

DASH = "\u2013"  # en dash: "no value" in a table cell
TIMES = "\u00d7"  # multiplication sign, for ratios

NOISY_PCT = 10.0
"""A cell during which processes not started by the benchmark used more than this (% of one core) is marked."""


def _cells(results: dict, name: str) -> dict[tuple[str, int], dict]:
    t = results["targets"].get(name)
    if not t or t.get("status") != "ok":
        return {}
    return {(c["mode"], c["c"]): c for c in t.get("cells", []) if "error" not in c}


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 3)


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 2)


def derive(results: dict) -> dict:
    """Added latency over direct (per cell), throughput ratios, and the issue's goals."""
    direct = _cells(results, "direct")
    for name in ALL_TARGETS:
        if name == "direct":
            continue
        for key, cell in _cells(results, name).items():
            d = direct.get(key)
            if d:
                cell["added_p50_ms"] = _sub(cell.get("p50_ms"), d.get("p50_ms"))
                if "ttfb_p50_ms" in cell:
                    cell["added_ttfb_p50_ms"] = _sub(cell.get("ttfb_p50_ms"), d.get("ttfb_p50_ms"))
    fl = _cells(results, "freellm")
    ratios = []
    for key, cell in sorted(fl.items(), key=lambda kv: (kv[0][0] != "non-stream", kv[0][1])):
        row = {"mode": key[0], "c": key[1]}
        for peer in ("litellm", "portkey", "floor"):
            other = _cells(results, peer).get(key)
            row[f"vs_{peer}"] = _div(cell.get("rps"), other.get("rps") if other else None)
        ratios.append(row)
    goals = []
    maxc = max(results["meta"]["concurrency"]) if results["meta"]["concurrency"] else 0

    def goal(what: str, value: float | None, target: float, higher_is_better: bool, unit: str) -> None:
        met = None if value is None else (value >= target if higher_is_better else value <= target)
        goals.append(
            {
                "goal": what,
                "value": value,
                "target": target,
                "higher": higher_is_better,
                "unit": unit,
                "met": met,
            }
        )

    c1 = fl.get(("non-stream", 1))
    goal("added p50, non-stream, c=1", c1.get("added_p50_ms") if c1 else None, GOAL_ADDED_MS, False, "ms")
    s1 = fl.get(("stream", 1))
    goal(
        "added TTFB p50, stream, c=1", s1.get("added_ttfb_p50_ms") if s1 else None, GOAL_ADDED_MS, False, "ms"
    )
    for mode in ("non-stream", "stream"):
        row = next((r for r in ratios if r["mode"] == mode and r["c"] == maxc), None)
        goal(f"req/s vs LiteLLM, {mode}, c={maxc}", row and row["vs_litellm"], GOAL_VS_LITELLM, True, TIMES)
        goal(f"req/s vs Portkey, {mode}, c={maxc}", row and row["vs_portkey"], GOAL_VS_PORTKEY, True, TIMES)
        goal(f"req/s vs floor, {mode}, c={maxc}", row and row["vs_floor"], GOAL_VS_FLOOR, True, TIMES)
    t = results["targets"].get("freellm") or {}
    goal("idle RSS per worker", t.get("idle_rss_mb"), GOAL_IDLE_RSS_MB, False, "MiB")
    features, feature_goals = feature_rows(results)
    return {
        "ratios": ratios,
        "goals": goals,
        "cache": cache_ratios(results),
        "features": features,
        "feature_goals": feature_goals,
    }


# Issue 17, part 2: features turned on, against the default row.
GOAL_ALL_CPU_RATIO = 1.3
"""Everything on together (``freellm-all``): CPU per request at most this many times the default row's."""
GOAL_HIT_RPS_RATIO = 2.0
"""Cache hits (``freellm-cache-hit``): at least this many times the default row's req/s."""

FEATURES = (
    ("freellm-cache-miss", "(a) cache on, every request a miss", "freellm"),
    ("freellm-cache-hit", "(b) cache on, every request a hit", "freellm"),
    ("freellm-balanced", "(c) `balanced` over 4 routes", "freellm"),
    ("freellm-session-profile", "(d) `X-Session-Id` + a profile's system prompt", "freellm"),
    ("freellm-no-metrics", "(e) `/metrics` off (the default row has it on)", "freellm"),
    ("freellm-redis", "(f) hot state in Redis", "freellm"),
    ("freellm-transcript", "(g) baseline: 20k-token transcript, compression off", "freellm"),
    ("freellm-transcript-lossless", "(g) 20k-token transcript, `lossless`", "freellm-transcript"),
    ("freellm-all-local", "(h) without Redis: (a) (c) (d) (e: on) and `lossless`", "freellm"),
    ("freellm-all", "(h) everything on: (a) (c) (d) (e: on) (f) and `lossless`", "freellm"),
)
"""(target, what is on, the row it is compared with)."""


def cpu_us_per_request(cell: dict) -> float | None:
    """The server's CPU time per completed request: its CPU % of one core over the cell ÷ req/s."""
    pct, rps = cell.get("server_cpu_pct"), cell.get("rps")
    if pct is None or not rps:
        return None
    return round(float(pct) / 100.0 / float(rps) * 1e6, 1)


def feature_rows(results: dict) -> tuple[list[dict], list[dict]]:
    """Per feature row and cell: req/s, CPU µs per request, and both against the row it is compared
    with; then the issue's two goals, per mode and concurrency measured."""
    rows: list[dict] = []
    base_cells = {name: _cells(results, name) for name in {"freellm", "freellm-transcript"}}
    for name, base_name in [("freellm", None), *((n, b) for n, _, b in FEATURES)]:
        cells = _cells(results, name)
        for key in sorted(cells, key=lambda k: (k[0] != "non-stream", k[1])):
            cell = cells[key]
            cpu = cpu_us_per_request(cell)
            base = base_cells.get(base_name or "", {}).get(key) if base_name else None
            base_cpu = cpu_us_per_request(base) if base else None
            rows.append(
                {
                    "target": name,
                    "mode": key[0],
                    "c": key[1],
                    "rps": cell.get("rps"),
                    "cpu_us": cpu,
                    "vs": base_name,
                    "cpu_ratio": _div(cpu, base_cpu),
                    "rps_ratio": _div(cell.get("rps"), base.get("rps") if base else None),
                    "noisy": (cell.get("foreign_cpu_pct") or 0) > NOISY_PCT,
                }
            )
    goals: list[dict] = []
    for r in rows:
        if r["target"] == "freellm-all" and r["cpu_ratio"] is not None:
            goals.append(
                {
                    "goal": "(h) everything on: CPU µs per request ÷ default",
                    "mode": r["mode"],
                    "c": r["c"],
                    "value": r["cpu_ratio"],
                    "target": GOAL_ALL_CPU_RATIO,
                    "higher": False,
                    "met": r["cpu_ratio"] <= GOAL_ALL_CPU_RATIO,
                }
            )
        if r["target"] == "freellm-cache-hit" and r["rps_ratio"] is not None:
            goals.append(
                {
                    "goal": "(b) cache hit: req/s ÷ default",
                    "mode": r["mode"],
                    "c": r["c"],
                    "value": r["rps_ratio"],
                    "target": GOAL_HIT_RPS_RATIO,
                    "higher": True,
                    "met": r["rps_ratio"] >= GOAL_HIT_RPS_RATIO,
                }
            )
    goals.sort(key=lambda g: (not g["goal"].startswith("(b)"), g["mode"] != "non-stream", g["c"]))
    return rows, goals


def features_markdown(derived: dict) -> list[str]:
    """The features table and the two goals' verdicts (empty when no feature row was measured)."""
    rows = derived.get("features") or []
    if not any(r["target"] != "freellm" for r in rows):
        return []
    what = {n: w for n, w, _ in FEATURES}
    lines = [
        "",
        "| features: row | on | mode | c | req/s | CPU µs per request | compared with | CPU ÷ | req/s ÷ |",
        "|---|---|---|--:|--:|--:|---|--:|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {LABELS[r['target']]} | {what.get(r['target'], 'defaults (metrics on, sessions on)')} | "
            f"{r['mode']} | {r['c']} | {_rps(r['rps'])}{' †' if r['noisy'] else ''} | {_num(r['cpu_us'])} | "
            f"{LABELS[r['vs']] if r['vs'] else ''} | {_ratio(r['cpu_ratio'])} | {_ratio(r['rps_ratio'])} |"
        )
    goals = derived.get("feature_goals") or []
    if goals:
        lines += ["", "| issue 17 goal | mode | c | measured | goal | met |", "|---|---|--:|--:|--:|---|"]
        for g in goals:
            op = "≥" if g["higher"] else "≤"
            lines.append(
                f"| {g['goal']} | {g['mode']} | {g['c']} | {_ratio(g['value'])} | {op} {g['target']:g}{TIMES} | "
                f"{'yes' if g['met'] else '**no**'} |"
            )
    return lines


def cache_ratios(results: dict) -> list[dict]:
    """Per cell: the cache rows' req/s against each other and against plain freellm (cache off)."""
    hit = _cells(results, "freellm-cache-hit")
    miss = _cells(results, "freellm-cache-miss")
    plain = _cells(results, "freellm")
    rows = []
    keys = sorted(set(hit) | set(miss), key=lambda k: (k[0] != "non-stream", k[1]))
    for key in keys:
        h, m, f = (x.get(key, {}).get("rps") for x in (hit, miss, plain))
        rows.append(
            {
                "mode": key[0],
                "c": key[1],
                "hit_rps": h,
                "miss_rps": m,
                "freellm_rps": f,
                "hit_vs_miss": _div(h, m),
                "hit_vs_freellm": _div(h, f),
                "miss_vs_freellm": _div(m, f),
            }
        )
    return rows


def cache_stats_line(stats: dict) -> str:
    if "error" in stats:
        return f"stats unavailable ({stats['error']})"
    entries = stats.get("entries") or {}
    return (
        f"{stats.get('hits', 0):,} hits, {stats.get('misses', 0):,} misses; "
        f"{entries.get('json', 0):,} JSON + {entries.get('stream', 0):,} stream entries, "
        f"{(stats.get('bytes') or 0) / 1024 / 1024:.1f} MiB at the end"
    )


def cache_surprise(name: str, stats: dict | None) -> str | None:
    """What contradicts the row's intent: a hit on the miss row, or more misses than the hit row's checks."""
    if not stats or "error" in stats:
        return None
    if name in ("freellm-cache-miss", "freellm-all", "freellm-all-local") and stats.get("hits"):
        return f"{stats['hits']} hit(s) on the row meant to miss every time"
    if name == "freellm-cache-hit" and (stats.get("misses") or 0) > 2:
        return f"{stats['misses']} misses on the row meant to hit (2 expected: one per mode)"
    return None


def _num(v: float | None, signed: bool = False) -> str:
    if v is None:
        return DASH
    a = abs(v)
    text = f"{v:.2f}" if a < 10 else f"{v:.1f}" if a < 100 else f"{v:,.0f}"
    return ("+" + text) if signed and v > 0 else text


def _pct(v: float | None) -> str:
    return DASH if v is None else f"{v:.0f}"


def _rps(v: float | None) -> str:
    return DASH if v is None else f"{v:,.0f}"


def _ratio(v: float | None) -> str:
    return DASH if v is None else f"{v:.2f}{TIMES}" if v < 10 else f"{v:.1f}{TIMES}"


def cell_line(cell: dict) -> str:
    if "error" in cell:
        return f"{cell['mode']:>10} c={cell['c']:<3} ERROR {cell['error']}"
    parts = [
        f"{cell['mode']:>10} c={cell['c']:<3}",
        f"{_rps(cell['rps']):>7} req/s",
        f"p50 {_num(cell['p50_ms'])} ms",
        f"p99 {_num(cell['p99_ms'])} ms",
    ]
    if "ttfb_p50_ms" in cell:
        parts.append(
            f"TTFB p50 {_num(cell['ttfb_p50_ms'])} / p99 {_num(cell['ttfb_p99_ms'])} ms (n={cell['ttfb_n']})"
        )
        if cell.get("ttfb_errors"):
            parts.append(f"probe errors {cell['ttfb_errors']} ({cell.get('ttfb_last_error', '')[:80]})")
    if cell.get("server_cpu_pct") is not None:
        parts.append(
            f"CPU server {_pct(cell['server_cpu_pct'])}% / load core {_pct(cell.get('load_core_pct'))}%"
        )
    if "peak_rss_mb" in cell:
        parts.append(f"RSS {cell['peak_rss_mb']} MiB")
    if cell.get("foreign_cpu_pct") is not None and cell["foreign_cpu_pct"] > NOISY_PCT:
        parts.append(f"!! other processes used {cell['foreign_cpu_pct']}% CPU")
    if cell.get("errors"):
        parts.append(f"errors {cell['errors']} {cell.get('error_detail')}")
    if cell.get("retried_after_crash"):
        parts.append("(measured again after a crash)")
    return "  ".join(parts)


def markdown(results: dict) -> str:
    meta = results["meta"]
    v = meta["versions"]
    m = meta["machine"]
    lines = [
        f"Run {meta['started_at']} with `{meta['command']}` ({meta.get('elapsed_s', '?')} s in all).",
        "",
        f"- Load generator: **{meta['loadgen_label']}**, {meta['duration_s']:g} s per cell after "
        f"{meta['warmup_s']:g} s of warm-up; streams of {meta['chunks']} content chunks, "
        f"{meta['chunk_delay_ms']:g} ms between chunks; {meta['workers']} worker(s) per gateway.",
        f"- TTFB: `bench/ttfb_probe.py`, alone for c=1; at {meta['probe_rate']:g} req/s on one extra connection "
        "alongside the load for c>1.",
        f"- Placement: {meta['placement']}; {meta.get('priority', 'default priority')}.",
        f"- Machine: {m['nproc']} cores ({m['cpu']}), {m['memory_gib']} GiB, Linux {m['kernel']}.",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
        *_noise_lines(results),
        "",
        "| target | mode | c | req/s | p50 ms | p99 ms | TTFB p50 ms | TTFB p99 ms | added p50 ms | added TTFB p50 ms "
        "| server CPU % | load core % | peak RSS MiB | errors |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name in ALL_TARGETS:
        t = results["targets"].get(name)
        if t is None:
            continue
        label = LABELS[name]
        if t["status"] != "ok":
            lines.append(f"| {label} | {t['status']}: {_md(t.get('reason', ''))} | | | | | | | | | | | | |")
            continue
        for c in t["cells"]:
            if "error" in c:
                lines.append(
                    f"| {label} | {c['mode']} | {c['c']} | error: {_md(c['error'])} | | | | | | | | | | |"
                )
                continue
            lines.append(
                "| "
                + " | ".join(
                    [
                        label,
                        c["mode"],
                        str(c["c"]),
                        _rps(c["rps"]) + (" †" if (c.get("foreign_cpu_pct") or 0) > NOISY_PCT else ""),
                        _num(c["p50_ms"]),
                        _num(c["p99_ms"]),
                        _num(c.get("ttfb_p50_ms")),
                        _num(c.get("ttfb_p99_ms")),
                        _num(c.get("added_p50_ms"), signed=True) if name != "direct" else "",
                        _num(c.get("added_ttfb_p50_ms"), signed=True) if name != "direct" else "",
                        _pct(c.get("server_cpu_pct")),
                        _pct(c.get("load_core_pct")),
                        _num(c.get("peak_rss_mb")) if "peak_rss_mb" in c else "",
                        (str(c["errors"]) if c["errors"] else "0")
                        + (" (cell re-run after a crash)" if c.get("retried_after_crash") else ""),
                    ]
                )
                + " |"
            )
    lines += [
        "",
        "| gateway | version | idle RSS MiB | peak RSS MiB | start-up s | status |",
        "|---|---|--:|--:|--:|---|",
    ]
    for name in ALL_TARGETS:
        t = results["targets"].get(name)
        if t is None or name == "direct":
            continue
        status = "ok" if t["status"] == "ok" else f"{t['status']}: {_md(t.get('reason', ''))}"
        for crash in t.get("crashes", []):
            status += f"; **{_md(crash)}** (restarted, cell measured again)"
        if t.get("note"):
            status += f" ({_md(t['note'])})"
        if t.get("cache_stats"):
            status += f"; cache: {_md(cache_stats_line(t['cache_stats']))}"
            surprise = cache_surprise(name, t["cache_stats"])
            if surprise:
                status += f" **{_md(surprise)}**"
        lines.append(
            f"| {LABELS[name]} | {_md(t.get('version', ''))} | {_num(t.get('idle_rss_mb'))} | "
            f"{_num(t.get('peak_rss_mb'))} | {_num(t.get('startup_s'))} | {status} |"
        )
    d = results.get("derived") or {}
    features_run = meta.get("preset") == "features"
    if d.get("ratios") and not features_run:
        lines += [
            "",
            "| freellm req/s ÷ | mode | c | LiteLLM | Portkey | floor |",
            "|---|---|--:|--:|--:|--:|",
        ]
        for r in d["ratios"]:
            lines.append(
                f"| | {r['mode']} | {r['c']} | {_ratio(r['vs_litellm'])} | {_ratio(r['vs_portkey'])} | {_ratio(r['vs_floor'])} |"
            )
    if d.get("cache"):
        lines += [
            "",
            "| cache: req/s | mode | c | hit | miss | freellm (cache off) | hit ÷ miss | hit ÷ freellm | miss ÷ freellm |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for r in d["cache"]:
            lines.append(
                f"| | {r['mode']} | {r['c']} | {_rps(r['hit_rps'])} | {_rps(r['miss_rps'])} | "
                f"{_rps(r['freellm_rps'])} | {_ratio(r['hit_vs_miss'])} | {_ratio(r['hit_vs_freellm'])} | "
                f"{_ratio(r['miss_vs_freellm'])} |"
            )
    lines += features_markdown(d)
    if d.get("goals") and not features_run:
        lines += ["", "| issue 3 target | measured | goal | met |", "|---|--:|--:|---|"]
        for g in d["goals"]:
            op = "≥" if g["higher"] else "≤"
            unit = g["unit"]
            val = (
                "not measured"
                if g["value"] is None
                else (
                    _ratio(g["value"]) if unit == TIMES else f"{_num(g['value'], signed=unit == 'ms')} {unit}"
                )
            )
            goal_text = f"{op} {g['target']:g}{unit}" if unit == TIMES else f"{op} {g['target']:g} {unit}"
            met = DASH if g["met"] is None else ("yes" if g["met"] else "**no**")
            lines.append(f"| {g['goal']} | {val} | {goal_text} | {met} |")
    return "\n".join(lines) + "\n"


def _noise_lines(results: dict) -> list[str]:
    seen = [
        (c["foreign_cpu_pct"], f"{LABELS[n]} {c['mode']} c={c['c']}")
        for n, t in results["targets"].items()
        for c in t.get("cells", [])
        if c.get("foreign_cpu_pct") is not None
    ]
    if not seen:
        return []
    avg = sum(p for p, _ in seen) / len(seen)
    worst = max(seen)
    line = (
        f"- Other load: processes not started by the benchmark used {avg:.1f}% of one core on average during "
        f"the measured cells (most: {worst[0]:.1f}% in {worst[1]})."
    )
    noisy = sum(1 for p, _ in seen if p > NOISY_PCT)
    if noisy:
        line += f" **{noisy} cell(s) marked † ran beside more than {NOISY_PCT:g}% foreign CPU: treat them with care.**"
    load = results["meta"].get("loadavg_at_start")
    if load:
        line += f" Load average at start: {load}."
    return [line]


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def update_docs(path: Path, begin: str, end: str, body: str) -> None:
    """Replace the text between ``begin`` and ``end`` in ``path`` (appending both markers if absent)."""
    text = path.read_text() if path.exists() else ""
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text and text.index(begin) < text.index(end):
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    path.write_text(text)
