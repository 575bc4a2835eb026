"""Helpers shared by the unit tests: golden-file loading and checking, and folding canonical chunks
through a :class:`~freellm.engine.pump.StreamPump`, and the small catalog the surfaces' model
resolution tests share.

Golden files hold their input and the reviewed ``expected`` output. After an intended change run the
test with ``FREELLM_UPDATE_GOLDEN=1`` to rewrite ``expected``, and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from freellm.config import Settings
from freellm.engine.pump import StreamPump
from freellm.routing.catalog import Catalog

__all__ = ["GOLDEN_ROOT", "UPDATE_GOLDEN", "check_golden", "golden_files", "pump_chunks", "surface_catalog"]

GOLDEN_ROOT = Path(__file__).resolve().parents[1] / "golden"
UPDATE_GOLDEN = os.environ.get("FREELLM_UPDATE_GOLDEN") == "1"


def golden_files(folder: Path, prefix: str) -> list[Path]:
    """The ``{prefix}_*.json`` golden files in ``folder``, sorted; there must be at least one."""
    files = sorted(folder.glob(f"{prefix}_*.json"))
    assert files, f"no {prefix} golden files in {folder}"
    return files


def check_golden(path: Path, doc: dict[str, Any], actual: Any) -> None:
    """``actual`` must equal ``doc["expected"]`` (or, with ``FREELLM_UPDATE_GOLDEN=1``, becomes it)."""
    if UPDATE_GOLDEN:
        doc["expected"] = actual
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return
    assert "expected" in doc, f"{path.name} has no expected output (run with FREELLM_UPDATE_GOLDEN=1)"
    assert actual == doc["expected"], f"{path.name}: {doc['description']}"


def pump_chunks(
    model: str, chunks: list[dict[str, Any]], *, saw_done: bool
) -> tuple[list[dict[str, Any]], Any]:
    """Feed (a deep copy of) ``chunks`` through a tool-wanting pump for ``model``: what it emits, and its
    result."""
    pump = StreamPump(model, wants_tools=True)
    out: list[dict[str, Any]] = []
    for chunk in json.loads(json.dumps(chunks)):
        out.extend(pump.feed(chunk))
    out.extend(pump.finish(saw_done=saw_done, include_usage=True))
    return out, pump.result()


def surface_catalog(surface: str, model_map: dict[str, str] | None = None) -> tuple[Catalog, dict[str, str]]:
    """A catalog of one provider (``alpha``: ``model-x``, ``big-model`` and the disabled ``off-model``)
    with ``model_map`` set on ``surface`` (``"anthropic"`` or ``"gemini"``), and that surface's map."""
    settings = Settings.model_validate(
        {
            "providers": [
                {
                    "name": "alpha",
                    "base_url": "http://127.0.0.1:1/v1",
                    "keys": ["k"],
                    "models": [{"id": "model-x"}, {"id": "big-model"}, {"id": "off-model", "enabled": False}],
                }
            ],
            "surfaces": {surface: {"model_map": model_map}} if model_map is not None else {},
        }
    )
    mapping: dict[str, str] = getattr(settings.surfaces, surface).model_map
    return Catalog(settings), mapping
