"""A fusion request's options: the ``fusion`` config section, overridden by the request's own object.

On chat the object is the body's ``fusion`` field; on Responses and Messages it is ``metadata.fusion``,
either an object or a JSON string (the official SDKs type metadata values as strings). Anything wrong
in it is a 400 naming the field, before any upstream call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from freellm.config import FusionConfig
from freellm.errors import ClientError

__all__ = ["FUSION_MODEL", "FusionOptions", "fusion_options", "is_fusion_model"]

FUSION_MODEL = "fusion"

Strategy = Literal["synthesize", "best_of"]
_STRATEGIES: dict[str, Strategy] = {"synthesize": "synthesize", "best_of": "best_of"}
_FIELDS = frozenset({"models", "k", "judge", "strategy", "expose_panel"})


def is_fusion_model(requested: str) -> bool:
    return requested.strip().lower() == FUSION_MODEL


@dataclass(frozen=True, slots=True)
class FusionOptions:
    models: tuple[str, ...]
    """Explicit members, in the order given; empty: the panel is chosen automatically."""
    k: int
    """Panel size: the first ``k`` members answer, the next ``k`` refill failed slots."""
    judge: str | None
    strategy: Strategy
    expose_panel: bool
    max_k: int
    panel_timeout_s: float
    max_cost_tokens: int
    param: str = "fusion"
    """Where the request's object sits on its surface (``fusion`` or ``metadata.fusion``), for errors."""


def fusion_options(raw: object, cfg: FusionConfig, *, param: str) -> FusionOptions:
    """Merge the request's fusion object (``raw``: None, an object or a JSON string) over ``cfg``.
    ``param`` is where the object sits on this surface (``fusion`` or ``metadata.fusion``), for errors."""
    given = _as_object(raw, param)
    models = tuple(cfg.panel)
    if given.get("models") is not None:
        models = _models(given["models"], f"{param}.models")
    judge = cfg.judge
    if given.get("judge") is not None:
        judge = _text(given["judge"], f"{param}.judge")
    strategy: Strategy = cfg.strategy
    if given.get("strategy") is not None:
        value = given["strategy"]
        if not isinstance(value, str) or value not in _STRATEGIES:
            raise _bad(f"{param}.strategy", "Input should be 'synthesize' or 'best_of'")
        strategy = _STRATEGIES[value]
    expose = given.get("expose_panel", False)
    if expose is None:
        expose = False
    if not isinstance(expose, bool):
        raise _bad(f"{param}.expose_panel", "Input should be a valid boolean")
    cap = cfg.max_k
    if given.get("k") is not None:
        k = given["k"]
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        if isinstance(k, bool) or not isinstance(k, int):
            raise _bad(f"{param}.k", "Input should be a valid integer")
        if not 1 <= k <= cap:
            raise _bad(f"{param}.k", f"Input should be between 1 and {cap} (fusion.max_k)")
    elif models:
        k = min(len(models), cap)
    else:
        k = min(cfg.default_k, cap)
    return FusionOptions(
        models=models,
        k=k,
        judge=judge,
        strategy=strategy,
        expose_panel=expose,
        max_k=cap,
        panel_timeout_s=cfg.panel_timeout_s,
        max_cost_tokens=cfg.max_cost_tokens,
        param=param,
    )


def _as_object(raw: object, param: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _bad(param, "Input should be an object or a JSON string holding one") from None
    if not isinstance(raw, dict):
        raise _bad(param, "Input should be an object")
    unknown = sorted(str(k) for k in raw if k not in _FIELDS)
    if unknown:
        raise _bad(param, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_FIELDS))}")
    return raw


def _models(value: object, param: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):  # a comma-separated list fits a metadata string
        value = [v for v in (p.strip() for p in value.split(",")) if v]
    if not isinstance(value, list):
        raise _bad(param, "Input should be a list of model names")
    return tuple(_text(v, f"{param}.{i}") for i, v in enumerate(value))


def _text(value: object, param: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(param, "Input should be a non-empty string")
    return value.strip()


def _bad(param: str, why: str) -> ClientError:
    return ClientError(400, f"Invalid request: {param}: {why}", code="invalid_fusion_options", param=param)
