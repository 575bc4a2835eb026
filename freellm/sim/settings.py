"""Simulator settings: the default scenario, per-model defaults, advertised models and limits.

Loaded from a YAML or JSON file (JSON is valid YAML) so ``freellm sim --scenario-file`` and the
benchmark can describe a whole upstream fleet without code.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from freellm.sim.embeddings import MAX_DIMENSIONS
from freellm.sim.scenario import Scenario, ScenarioError, parse_scenario

__all__ = ["DEFAULT_MODELS", "SimConfigError", "SimSettings", "build_sim_settings", "load_sim_settings"]

DEFAULT_MODELS = ("model-x", "model-y", "model-z")


class SimConfigError(ValueError):
    """A simulator settings file is unreadable or invalid."""


@dataclass
class SimSettings:
    """Everything a simulator instance starts with; ``POST /_sim/reset`` returns to these values."""

    default: Scenario = field(default_factory=Scenario)
    """Scenario for requests no script or per-model default claims."""
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    """Listed by ``GET /{provider}/v1/models``; any other model name is still answered."""
    per_model: dict[str, Scenario] = field(default_factory=dict)
    """Defaults keyed ``"provider/model"`` or ``"provider/*"``."""
    log_limit: int = 10_000
    """Most request-log entries kept (oldest dropped), so a long benchmark run does not grow memory."""
    stall_max_s: float = 3600.0
    """How long a stalled request keeps its connection open when the client never goes away."""
    disconnect_poll_s: float = 1.0
    """Fallback check for a vanished client while stalling, for servers run without handler
    cancellation (``start_sim`` and ``run_sim_forever`` enable it, so detection there is immediate)."""
    embedding_dimensions: int = 8
    """Width of a simulated embedding when the request asks for none (``dimensions`` on OpenAI,
    ``outputDimensionality`` on Gemini): small, so logged answers and test expectations stay readable."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimSettings:
        """Validate a parsed settings file (keys: default, models, per_model, log_limit, stall_max_s,
        disconnect_poll_s, embedding_dimensions)."""
        if not isinstance(data, Mapping):
            raise SimConfigError("simulator settings must be a mapping")
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise SimConfigError(
                f"unknown simulator setting(s) {unknown}; valid: {', '.join(sorted(allowed))}"
            )
        kwargs: dict[str, Any] = {}
        try:
            if "default" in data:
                kwargs["default"] = parse_scenario(data["default"])
            if "per_model" in data:
                per_model = data["per_model"] or {}
                if not isinstance(per_model, Mapping):
                    raise SimConfigError("'per_model' must map 'provider/model' to a scenario")
                for key in per_model:
                    if not isinstance(key, str) or key.count("/") != 1:
                        raise SimConfigError(f"per_model key {key!r} must look like 'provider/model'")
                kwargs["per_model"] = {k: parse_scenario(v) for k, v in per_model.items()}
        except ScenarioError as exc:
            raise SimConfigError(str(exc)) from exc
        if "models" in data:
            models = data["models"]
            if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
                raise SimConfigError("'models' must be a list of strings")
            kwargs["models"] = list(models)
        for name in ("log_limit", "stall_max_s", "disconnect_poll_s"):
            if name in data:
                value = data[name]
                if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                    raise SimConfigError(f"{name!r} must be a positive number")
                kwargs[name] = int(value) if name == "log_limit" else float(value)
        if "embedding_dimensions" in data:
            dims = data["embedding_dimensions"]
            if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= MAX_DIMENSIONS:
                raise SimConfigError(f"'embedding_dimensions' must be an integer from 1 to {MAX_DIMENSIONS}")
            kwargs["embedding_dimensions"] = dims
        return cls(**kwargs)


def load_sim_settings(path: str | os.PathLike[str]) -> SimSettings:
    """Read a YAML or JSON settings file into :class:`SimSettings`."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SimConfigError(f"cannot read simulator settings {p}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise SimConfigError(f"simulator settings {p} are not valid YAML/JSON: {exc}") from exc
    try:
        return SimSettings.from_dict(raw or {})
    except SimConfigError as exc:
        raise SimConfigError(f"simulator settings {p}: {exc}") from exc


def build_sim_settings(
    scenario_file: str | os.PathLike[str] | None = None,
    chunks: int | None = None,
    chunk_delay_ms: float | None = None,
) -> SimSettings:
    """What ``freellm sim`` needs: the file (if any) with ``--chunks``/``--chunk-delay-ms`` applied to the
    server default scenario."""
    settings = load_sim_settings(scenario_file) if scenario_file else SimSettings()
    overrides: dict[str, Any] = {}
    if chunks is not None:
        overrides["chunks"] = chunks
    if chunk_delay_ms is not None:
        overrides["chunk_delay_ms"] = chunk_delay_ms
    if overrides:
        settings.default = dataclasses.replace(settings.default, **overrides)
        _check_overrides(settings.default)
    return settings


def _check_overrides(scenario: Scenario) -> None:
    if scenario.chunks < 1:
        raise SimConfigError("--chunks must be >= 1")
    if scenario.chunk_delay_ms < 0:
        raise SimConfigError("--chunk-delay-ms must be >= 0")
