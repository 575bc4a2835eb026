"""Which models can be served right now — the one answer every model listing gives
(``GET /v1/models``, Ollama's ``/api/tags``, the MCP ``list_models`` tool) — for chat models and, apart,
for embedding families.

A model is *available* when at least one of its routes is enabled, has a key, is not retired by its
provider and has a key the health pass has not disabled; otherwise the first missing step is the
reason (``disabled`` → ``no_key`` → ``retired`` → ``no_healthy_key``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from freellm.routing.catalog import Catalog, ModelRoute

if TYPE_CHECKING:
    from freellm.routing.router import Router

__all__ = ["ModelAvailability", "embedding_availability", "model_availability"]


@dataclass(frozen=True, slots=True)
class ModelAvailability:
    id: str
    """The model id as the catalog's first route spells it."""
    routes: list[ModelRoute]
    context_window: int | None
    """The largest context any of its routes declares."""
    available: bool
    reason: str | None
    """Why it is not available (None when it is)."""


def model_availability(catalog: Catalog, router: Router) -> list[ModelAvailability]:
    """Every catalog chat model (grouped by id, in catalog order) with its availability now."""
    return [_availability(routes[0].model, routes, catalog, router) for routes in catalog.groups.values()]


def embedding_availability(catalog: Catalog, router: Router) -> list[ModelAvailability]:
    """Every embedding family (its name as first declared) with its availability now."""
    return [
        _availability(routes[0].family or routes[0].model, routes, catalog, router) for routes in catalog.families.values()
    ]


def _availability(name: str, routes: list[ModelRoute], catalog: Catalog, router: Router) -> ModelAvailability:
    enabled = [r for r in routes if r.enabled]
    keyed = [r for r in enabled if catalog.keys.get(r.provider)]
    current = [r for r in keyed if r.label not in router.retired]
    healthy = [r for r in current if any(router.health.usable(r.provider, k.key_id) for k in catalog.keys[r.provider])]
    contexts = [r.context_window for r in routes if r.context_window]
    reason = None
    if not healthy:
        reason = "disabled" if not enabled else "no_key" if not keyed else "retired" if not current else "no_healthy_key"
    return ModelAvailability(
        id=name,
        routes=routes,
        context_window=max(contexts) if contexts else None,
        available=bool(healthy),
        reason=reason,
    )
