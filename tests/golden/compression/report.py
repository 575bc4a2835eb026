"""The savings table of docs/compression.md: every mode on every corpus item.

``python -m tests.golden.compression.report`` prints it as Markdown. Runs: ``lossless``, ``standard`` and
``aggressive`` without a target, and ``aggressive_target``: aggressive with a target of a quarter of the
item's estimated tokens (so the run stops as soon as it is reached, and hard-budget gets a goal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from freellm.compression import Compressor
from freellm.config import CompressionConfig

__all__ = ["CORPUS", "MODES", "measure", "run_mode", "table"]

CORPUS = Path(__file__).resolve().parent / "corpus"
MODES = ("lossless", "standard", "aggressive", "aggressive_target")


def run_mode(compressor: Compressor, messages: list[dict[str, Any]], run: str) -> Any:
    """One run of the table (``aggressive_target``: aggressive, target = ¼ of the estimated tokens)."""
    if run == "aggressive_target":
        chars = sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str))
        return compressor.compress(messages, mode="aggressive", target_tokens=max(1, chars // 16), record=False)
    return compressor.compress(messages, mode=run, record=False)


def measure(messages: list[dict[str, Any]]) -> dict[str, float]:
    compressor = Compressor(CompressionConfig(mode="aggressive"), filters_dir=None)
    out: dict[str, float] = {}
    for mode in MODES:
        o = run_mode(compressor, messages, mode)
        out[mode] = round(100.0 * o.saved_chars / o.chars_before, 1) if o.chars_before else 0.0
    return out


def table() -> str:
    rows = ["| corpus item | chars | est. tokens | lossless | standard | aggressive | aggressive, target ¼ |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(CORPUS.glob("*.json")):
        doc = json.loads(path.read_text())
        chars = sum(len(m["content"]) for m in doc["messages"] if isinstance(m.get("content"), str))
        saved = measure(doc["messages"])
        rows.append(
            f"| `{path.stem}` | {chars:,} | {chars // 4:,} | "
            + " | ".join(f"{saved[m]:.1f} %" for m in MODES)
            + " |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
