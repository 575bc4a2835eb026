"""The engines in their order of application, and which of them each mode runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from freellm.compression.engines import (
    EngineParams,
    aging,
    dedup,
    hard_budget,
    jsoncompact,
    lite,
    read_lifecycle,
    relevance,
    toolfilter,
)
from freellm.compression.types import EngineContext, EngineResult, Slots

__all__ = ["ENGINES", "ENGINE_IDS", "MODE_ENGINES", "EngineSpec"]


@dataclass(frozen=True, slots=True)
class EngineSpec:
    id: str
    lossy: bool
    params: type[EngineParams]
    run: Callable[[Slots, EngineContext, Any], EngineResult]


ENGINES: tuple[EngineSpec, ...] = tuple(
    EngineSpec(mod.ID, mod.LOSSY, mod.Params, mod.run)
    for mod in (dedup, lite, read_lifecycle, toolfilter, jsoncompact, relevance, aging, hard_budget)
)
"""The spec's order: dedup, lite, read-lifecycle, toolfilter, jsoncompact, relevance, aging, hard-budget."""

ENGINE_IDS: tuple[str, ...] = tuple(e.id for e in ENGINES)

_LOSSLESS = frozenset({"dedup", "lite", "jsoncompact"})
_STANDARD = _LOSSLESS | {"read-lifecycle", "toolfilter"}
_AGGRESSIVE = _STANDARD | {"relevance", "aging", "hard-budget"}

MODE_ENGINES: dict[str, frozenset[str]] = {
    "off": frozenset(),
    "lossless": _LOSSLESS,
    "standard": _STANDARD,
    "aggressive": _AGGRESSIVE,
}
