"""Route selection: the first (model, key) of the plan that passes every gate.

Strategies and scoring plug in at :meth:`Router.order` (today: the plan's order, which is the chain for
``auto`` and config order for groups). Key choice is round-robin per route; each key is gated by the
request's skip set, its cooldown (and the model's bench), and its rate windows including in-flight
leases. The winner takes a lease for its token estimate, released by the fallback loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from freellm.config import Settings
from freellm.engine.exhaustion import RouteDiagnostic
from freellm.providers.base import Provider
from freellm.routing.catalog import Catalog, KeyRef, ModelRoute
from freellm.routing.limits import check_limits
from freellm.store.base import StateStore, key_scope, model_scope

__all__ = ["Needs", "Pick", "Plan", "Router", "SkipSets"]


@dataclass(frozen=True, slots=True)
class Plan:
    strategy_key: str
    routes: list[ModelRoute]
    pinned: bool = False
    """A hard pin (``provider/model``): nothing may reorder or override it."""


@dataclass(frozen=True, slots=True)
class Needs:
    """What a route must offer to serve this request."""

    estimate: int
    tools: bool = False
    vision: bool = False


@dataclass(slots=True)
class SkipSets:
    keys: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    providers: set[str] = field(default_factory=set)


@dataclass(slots=True)
class Pick:
    choice: tuple[ModelRoute, KeyRef] | None
    lease_id: str = ""
    diagnostics: list[RouteDiagnostic] = field(default_factory=list)
    window_frees_at: float | None = None
    """Soonest time (epoch s) a full rate window frees a skipped key, for ``retryAtMs``."""


class Router:
    def __init__(self, settings: Settings, catalog: Catalog, providers: dict[str, Provider], store: StateStore) -> None:
        self._settings = settings
        self.catalog = catalog
        self._providers = providers
        self._store = store
        self._rr: dict[str, int] = {}

    def provider(self, name: str) -> Provider:
        return self._providers[name]

    def plan(self, requested: str, profile: str | None = None) -> Plan:
        """Resolve the requested model (raises ClientError 404 for unknown or disabled models)."""
        strategy, routes = self.catalog.resolve(requested, profile)
        return Plan(strategy, routes, pinned=self.catalog.is_pin(requested))

    def order(self, plan: Plan) -> list[ModelRoute]:
        return plan.routes

    async def pick(self, plan: Plan, needs: Needs, skip: SkipSets, now: float) -> Pick:
        diagnostics: list[RouteDiagnostic] = []
        frees_at: float | None = None
        lease_ttl = self._settings.fallback.lease_ttl_s
        for route in self.order(plan):
            label = route.label
            if label in skip.models or route.provider in skip.providers:
                diagnostics.append(RouteDiagnostic(label, "skipped", "already failed in this request"))
                continue
            reason = _capability_gap(route, needs)
            if reason is not None:
                diagnostics.append(RouteDiagnostic(label, reason[0], reason[1]))
                continue
            keys = self.catalog.keys.get(route.provider) or []
            if not keys:
                diagnostics.append(RouteDiagnostic(label, "no_key", "no API key configured"))
                continue
            bench = await self._store.get_cooldown(model_scope(route.provider, route.model), now)
            if bench is not None:
                diagnostics.append(RouteDiagnostic(label, "cooldown", f"model benched for {bench.until - now:.0f}s"))
                continue
            start = self._rr.get(label, 0)
            n = len(keys)
            for offset in range(n):
                idx = (start + offset) % n
                key = keys[idx]
                scope = key_scope(route.provider, route.model, key.key_id)
                if scope in skip.keys:
                    continue
                gate = await self._key_gate(route, scope, idx, needs, now)
                if gate is not None:
                    diagnostics.append(gate[0])
                    retry_at = gate[1]
                    if retry_at is not None and (frees_at is None or retry_at < frees_at):
                        frees_at = retry_at
                    continue
                self._rr[label] = idx + 1
                lease_id = await self._store.acquire_lease(scope, needs.estimate, now, lease_ttl)
                return Pick((route, key), lease_id, diagnostics)
        return Pick(None, "", diagnostics, frees_at)

    async def servable(self, route: ModelRoute, needs: Needs, now: float) -> bool:
        """Could ``route`` serve ``needs`` right now — enabled, capable, not benched, some key with no
        cooldown and room in its windows? Takes no lease (fusion's automatic panel asks this)."""
        if not route.enabled or _capability_gap(route, needs) is not None:
            return False
        keys = self.catalog.keys.get(route.provider) or []
        if not keys or await self._store.get_cooldown(model_scope(route.provider, route.model), now) is not None:
            return False
        for idx, key in enumerate(keys):
            scope = key_scope(route.provider, route.model, key.key_id)
            if await self._key_gate(route, scope, idx, needs, now) is None:
                return True
        return False

    async def _key_gate(
        self, route: ModelRoute, scope: str, idx: int, needs: Needs, now: float
    ) -> tuple[RouteDiagnostic, float | None] | None:
        """Why one key cannot take this request now (and when its window frees), or None when it can."""
        cooldown = await self._store.get_cooldown(scope, now)
        if cooldown is not None:
            detail = f"key{idx + 1} cooling down for {cooldown.until - now:.0f}s"
            return RouteDiagnostic(route.label, "cooldown", detail), None
        usage = await self._store.usage(scope, now)
        verdict = check_limits(route.limits, usage, needs.estimate)
        if not verdict.ok:
            return RouteDiagnostic(route.label, verdict.reason or "rpm", f"key{idx + 1} at its limit"), verdict.retry_at
        return None


def _capability_gap(route: ModelRoute, needs: Needs) -> tuple[str, str] | None:
    if needs.tools and not route.tools:
        return "capability", "does not support tools"
    if needs.vision and not route.vision:
        return "capability", "does not support images"
    if route.context_window is not None and needs.estimate > route.context_window:
        return "too_large", f"< estimated {needs.estimate} tokens (context {route.context_window})"
    tpm = route.limits.tpm
    if tpm is not None and needs.estimate > tpm:
        return "too_large", f"< estimated {needs.estimate} tokens (tpm {tpm})"
    return None
