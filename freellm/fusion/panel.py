"""Who sits on a fusion panel: explicit members filtered with reasons, or an automatic, diverse pick.

Both are pure functions over routes the caller already has (servability needs the store, so the
orchestrator filters automatic candidates before calling :func:`automatic_panel`). The first ``k``
members answer; the next ``k`` are the refill pool for slots whose member gives up — so a request
never dispatches more than ``2k`` members.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from freellm.errors import ClientError
from freellm.routing.catalog import ModelRoute

__all__ = ["Dropped", "PanelPlan", "automatic_panel", "diversify", "explicit_panel", "model_family"]


@dataclass(frozen=True, slots=True)
class Dropped:
    """An explicit member left out, and why: ``unknown``, ``disabled``, ``not_allowed``, ``no_tools``,
    ``no_vision`` or ``over_cap``."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class PanelPlan:
    members: tuple[ModelRoute, ...]
    pool: tuple[ModelRoute, ...]
    dropped: tuple[Dropped, ...] = ()


def explicit_panel(
    names: Sequence[str],
    resolve: Callable[[str], ModelRoute | str],
    *,
    k: int,
    cap: int,
    tools: bool,
    vision: bool,
    allowed: Callable[[str], bool] = lambda name: True,
    param: str = "fusion.models",
) -> PanelPlan:
    """Resolve each name (``resolve`` gives a route or why not), drop what cannot serve — no
    substitutes — and dedupe. None left: a 400 that names every dropped member and its reason."""
    kept: list[ModelRoute] = []
    dropped: list[Dropped] = []
    seen: set[str] = set()
    for name in names:
        if not allowed(name):
            dropped.append(Dropped(name, "not_allowed"))
            continue
        route = resolve(name)
        if isinstance(route, str):
            dropped.append(Dropped(name, route))
        elif route.label in seen:
            continue
        elif tools and not route.tools:
            dropped.append(Dropped(name, "no_tools"))
        elif vision and not route.vision:
            dropped.append(Dropped(name, "no_vision"))
        elif len(kept) >= cap:
            dropped.append(Dropped(name, "over_cap"))
        else:
            seen.add(route.label)
            kept.append(route)
    if not kept:
        reasons = ", ".join(f"{d.name} ({d.reason})" for d in dropped) or "none given"
        raise ClientError(
            400,
            f"No fusion panel: every requested member was dropped: {reasons}.",
            code="fusion_no_panel",
            param=param,
        )
    return PanelPlan(tuple(kept[:k]), tuple(kept[k : 2 * k]), tuple(dropped))


def automatic_panel(candidates: Sequence[ModelRoute], *, k: int) -> PanelPlan:
    """``candidates``: the routes servable now and capable of the request, in routing order."""
    ordered = diversify(candidates)
    if not ordered:
        raise ClientError(
            400,
            "No fusion panel: no model can serve this request right now (every route is on cooldown, "
            "at its limit, without a key or missing a capability).",
            code="fusion_no_panel",
            param="model",
        )
    return PanelPlan(tuple(ordered[:k]), tuple(ordered[k : 2 * k]))


def diversify(routes: Sequence[ModelRoute]) -> list[ModelRoute]:
    """One route per provider first (in order), then the rest; within each part a model family seen
    before moves behind the families not yet seen. Stable otherwise."""
    first: list[ModelRoute] = []
    rest: list[ModelRoute] = []
    providers: set[str] = set()
    for route in {r.label: r for r in routes}.values():
        (rest if route.provider in providers else first).append(route)
        providers.add(route.provider)
    families: set[str] = set()
    return _demote_repeats(first, families) + _demote_repeats(rest, families)


def _demote_repeats(routes: list[ModelRoute], families: set[str]) -> list[ModelRoute]:
    fresh: list[ModelRoute] = []
    repeated: list[ModelRoute] = []
    for route in routes:
        family = model_family(route.model)
        (repeated if family in families else fresh).append(route)
        families.add(family)
    return fresh + repeated


def model_family(model_id: str) -> str:
    """``org/Llama-3.3-70B:free`` → ``llama-3.3-70b``: lower-cased, without any path or ``:`` tag."""
    name = model_id.lower().rsplit("/", 1)[-1]
    return name.split(":", 1)[0]
