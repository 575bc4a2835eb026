"""Route selection: the first (model, key) of the plan that passes every gate.

:meth:`Router.order` puts the plan's routes in the order to try them: the chain's (``priority``, the
default) or by a scored strategy (:mod:`freellm.routing.scoring` over :mod:`freellm.routing.stats`),
with a sticky session's route first. :meth:`Router.check` gates one route: the request's skip set,
its capabilities, retirement, the model's bench, then each key — its health, its cooldown (learned
windows included) and its rate windows with in-flight leases, against the configured limits merged
with the learned ones. :meth:`Router.pick` takes the first route that passes and a lease for its token
estimate (released by the fallback loop), the key's rate check and its lease in one atomic store step; :meth:`Router.examine` runs the same checks over every
route without side effects (the explain route, fusion's panel, exhaustion without an attempt).

Keys of one route take turns (round-robin); under a scored strategy, once they have statistics, they
are ordered by the same reliability score.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from freellm.config import Settings
from freellm.engine.exhaustion import RouteDiagnostic
from freellm.errors import ClientError
from freellm.providers.base import Provider
from freellm.routing.catalog import Catalog, KeyRef, ModelRoute
from freellm.routing.health import HEALTH_SETTING, KeyHealth
from freellm.routing.learned import LEARNED_SETTING, LearnedLimits
from freellm.routing.limits import LimitVerdict, check_limits
from freellm.routing.scoring import RouteFacts, Scored, Strategy, order_keys, order_routes, resolve_strategy
from freellm.routing.stats import Snapshot, StatsBook
from freellm.store.base import CooldownRecord, StateStore, key_scope, model_scope

__all__ = ["Needs", "Pick", "Plan", "RouteCheck", "Router", "SkipSets"]

RETIRED = "retired"
"""The cooldown source that marks a model scope as retired (a 410, an end-of-life answer)."""
LEARNED = "learned"
"""The cooldown source of a window the provider said is spent (headers or a 429's stated limit)."""
_SEED_ROWS = 5000
"""Request-log rows the statistics are seeded from at start-up."""


@dataclass(frozen=True, slots=True)
class Plan:
    strategy_key: str
    routes: list[ModelRoute]
    pinned: bool = False
    """A hard pin (``provider/model``): nothing may reorder or override it."""
    strategy: Strategy = "priority"
    preferred: str | None = None
    """A route label tried first whatever the strategy says (the session's sticky route)."""


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


@dataclass(slots=True)
class RouteCheck:
    """One route's gates for one request: the key that would serve (None: none can) and why the
    others — or the route itself — were passed over."""

    route: ModelRoute
    key: KeyRef | None = None
    key_index: int = 0
    diagnostics: list[RouteDiagnostic] = field(default_factory=list)
    frees_at: float | None = None
    lease_id: str = ""
    """The lease taken on ``key`` (only by :meth:`Router.pick`; :meth:`Router.check` takes none)."""

    @property
    def skip(self) -> str | None:
        """Why the route cannot serve, in one word (the last reason recorded), or None."""
        if self.key is not None:
            return None
        return self.diagnostics[-1].kind if self.diagnostics else "no_key"


class Router:
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        providers: dict[str, Provider],
        store: StateStore,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self._settings = settings
        self.catalog = catalog
        self._providers = providers
        self._store = store
        self._rr: dict[str, int] = {}
        self._rng = rng or random.Random()
        self._strategy: Strategy = resolve_strategy(settings.routing.strategy) or "priority"
        self._exploration = settings.routing.exploration
        self.stats = StatsBook(settings.routing.stats_ttl_s)
        self.learned = LearnedLimits()
        self.health = KeyHealth(settings.health.disable_after)
        self.retired: set[str] = set()
        """Labels of retired models (mirrored from the store's ``retired`` model cooldowns)."""
        self._facts: dict[str, RouteFacts] = {}
        self._facts_of: Snapshot | None = None
        self._orders: dict[tuple[str, ...], tuple[list[ModelRoute], ModelRoute | None]] = {}
        self._orders_of: Snapshot | None = None

    def provider(self, name: str) -> Provider:
        return self._providers[name]

    def reconfigure(self, settings: Settings, catalog: Catalog, providers: dict[str, Provider]) -> None:
        """New routes, keys or strategy applied live (the admin API): what was learned — statistics,
        limits, key health, retirements — is kept; the cached orders are rebuilt on the next request."""
        self._settings = settings
        self.catalog = catalog
        self._providers = providers
        self._strategy = resolve_strategy(settings.routing.strategy) or "priority"
        self._exploration = settings.routing.exploration
        self._facts_of = None
        self._orders_of = None
        self._orders.clear()

    async def restore(self, now: float) -> None:
        """Load what earlier runs learned: limits, key health, retired models, and the statistics
        (seeded from the newest request-log rows)."""
        store = self._store
        self.learned.load(await store.get_setting(LEARNED_SETTING), self.catalog.by_label)
        self.health.load(await store.get_setting(HEALTH_SETTING))
        for scope, record in (await store.active_cooldowns(now)).items():
            if record.source == RETIRED:
                self.retired.add(scope.replace("\x1f", "/", 1))
        self.stats.seed(await store.recent_requests(_SEED_ROWS))

    # ---- plans and order ------------------------------------------------------------------------------

    def plan(self, requested: str, profile: str | None = None) -> Plan:
        """Resolve the requested model (raises ClientError 404 for unknown, disabled or retired models)."""
        key, routes = self.catalog.resolve(requested, profile)
        pinned = self.catalog.is_pin(requested)
        if pinned and routes[0].label in self.retired:
            raise ClientError(
                404, f"The model `{requested}` has been retired by its provider.", code="model_not_found", param="model"
            )
        strategy = self._strategy
        if pinned:
            strategy = "priority"
        elif key.startswith("auto:"):
            strategy = resolve_strategy(key[5:]) or strategy
        return Plan(key, routes, pinned=pinned, strategy=strategy)

    def embedding_plan(self, requested: str) -> Plan:
        """An embeddings request's routes: its family's members in declaration order (never scored or
        reordered — the first declared member is the one the operator wants), or the pinned one."""
        family, routes, pinned = self.catalog.resolve_embedding(requested)
        if pinned and routes[0].label in self.retired:
            raise ClientError(
                404, f"The model `{requested}` has been retired by its provider.", code="model_not_found", param="model"
            )
        return Plan(f"embed:{family.lower()}", routes, pinned=pinned)

    def order(self, plan: Plan) -> list[ModelRoute]:
        """The routes in the order a request tries them (see the module doc)."""
        routes = plan.routes
        if plan.strategy != "priority" and len(routes) > 1:
            routes = self._scored_order(plan)
        if plan.preferred is not None and routes and routes[0].label != plan.preferred:
            first = [r for r in routes if r.label == plan.preferred]
            routes = [*first, *(r for r in routes if r.label != plan.preferred)]
        return routes

    def _scored_order(self, plan: Plan) -> list[ModelRoute]:
        """The scored order, computed once per statistics snapshot and plan — with one Thompson draw
        per route, so the order explores as the reference's does, at the cost of a dictionary lookup
        per request — then, with the opt-in exploration share, a route with few samples first."""
        snap = self.stats.snapshot(time.time())
        if snap is not self._orders_of:
            self._orders.clear()
            self._orders_of = snap
        key = (plan.strategy, *(r.label for r in plan.routes))
        cached = self._orders.get(key)
        if cached is None:
            by_label = {r.label: r for r in plan.routes}
            order = [by_label[s.label] for s in self._score(plan, snap, self._rng)]
            fresh = [r for r in order if snap.routes.get(r.label) is None or snap.routes[r.label].samples < 5]
            cached = self._orders[key] = (order, fresh[0] if fresh else None)
        order, explore = cached
        if explore is not None and self._exploration > 0 and self._rng.random() < self._exploration:
            return [explore, *(r for r in order if r is not explore)]
        return order

    def scored(self, plan: Plan) -> list[Scored]:
        """The plan's routes scored by its strategy with the posterior means (deterministic: explain)."""
        return self._score(plan, self.stats.snapshot(time.time()), None)

    def _score(self, plan: Plan, snap: Snapshot, rng: random.Random | None) -> list[Scored]:
        facts = self._route_facts(snap)
        return order_routes([facts[r.label] for r in plan.routes], snap.routes, plan.strategy, rng=rng)

    def _route_facts(self, snap: Snapshot) -> dict[str, RouteFacts]:
        """What scoring needs of every route, rebuilt once per statistics snapshot."""
        if self._facts_of is snap:
            return self._facts
        facts: dict[str, RouteFacts] = {}
        for route in self.catalog.routes:
            rpd = self.learned.effective(route).rpd
            keys = len(self.catalog.keys.get(route.provider) or ())
            headroom = None
            if rpd and keys:
                headroom = max(0.0, 1.0 - snap.today.get(route.label, 0) / (rpd * keys))
            facts[route.label] = RouteFacts(
                label=route.label,
                tier=route.tier,
                rank=route.rank,
                is_local=route.is_local,
                headroom=headroom,
                rate_limit_penalty=snap.penalties.get(route.label, 0.0),
            )
        self._facts, self._facts_of = facts, snap
        return facts

    # ---- gates ----------------------------------------------------------------------------------------

    async def pick(self, plan: Plan, needs: Needs, skip: SkipSets, now: float) -> Pick:
        """The first route whose gates pass, with a lease on its key taken in the same atomic step as
        the key's rate check (``StateStore.acquire_lease_within``): replicas sharing the store can
        never both take a key's last slot — the one that loses sees the key at its limit and goes on
        to the next key or route."""
        diagnostics: list[RouteDiagnostic] = []
        frees_at: float | None = None
        lease_ttl = self._settings.fallback.lease_ttl_s
        for route in self.order(plan):
            check = await self._gate(route, needs, skip, now, plan.strategy != "priority", lease_ttl)
            diagnostics += check.diagnostics
            if check.frees_at is not None and (frees_at is None or check.frees_at < frees_at):
                frees_at = check.frees_at
            if check.key is not None:
                self._rr[route.label] = check.key_index + 1
                return Pick((route, check.key), check.lease_id, diagnostics)
        return Pick(None, "", diagnostics, frees_at)

    async def examine(self, plan: Plan, needs: Needs, now: float) -> list[RouteCheck]:
        """Every route's gates in the order a request would try them; no lease, no side effect."""
        scored = plan.strategy != "priority"
        return [await self.check(route, needs, SkipSets(), now, scored=scored) for route in self.order(plan)]

    async def check(
        self, route: ModelRoute, needs: Needs, skip: SkipSets, now: float, *, scored: bool = False
    ) -> RouteCheck:
        """One route's gates, without side effects (no lease is taken)."""
        return await self._gate(route, needs, skip, now, scored, None)

    async def _gate(
        self, route: ModelRoute, needs: Needs, skip: SkipSets, now: float, scored: bool, lease_ttl: float | None
    ) -> RouteCheck:
        """:meth:`check`, and with ``lease_ttl`` also the lease of the key that passes: its rate check
        and its lease are one store operation, so the verdict cannot go stale in between."""
        label = route.label
        out = RouteCheck(route)
        diagnostics = out.diagnostics
        if label in skip.models or route.provider in skip.providers:
            diagnostics.append(RouteDiagnostic(label, "skipped", "already failed in this request"))
            return out
        if label in self.retired:
            diagnostics.append(RouteDiagnostic(label, RETIRED, "retired by its provider"))
            return out
        reason = _capability_gap(route, needs)
        if reason is not None:
            diagnostics.append(RouteDiagnostic(label, reason[0], reason[1]))
            return out
        keys = self.catalog.keys.get(route.provider) or []
        if not keys:
            diagnostics.append(RouteDiagnostic(label, "no_key", "no API key configured"))
            return out
        mscope = model_scope(route.provider, route.model)
        if lease_ttl is not None:
            return await self._lease_gate(route, keys, needs, skip, now, scored, lease_ttl, out)
        bench = await self._store.get_cooldown(mscope, now)
        if bench is not None:
            diagnostics.append(_benched(label, bench, now))
            return out
        limits = self.learned.effective(route)
        for idx, key, scope in self._candidate_keys(route, keys, skip, scored, out):
            cooldown = await self._store.get_cooldown(scope, now)
            if cooldown is not None:
                kind = "learned_limit" if cooldown.source == LEARNED else "cooldown"
                detail = f"key{idx + 1} cooling down for {cooldown.until - now:.0f}s"
                diagnostics.append(RouteDiagnostic(label, kind, detail))
                continue
            usage = await self._store.usage(scope, now)
            verdict = check_limits(limits, usage, needs.estimate)
            if not verdict.ok:
                _at_limit(out, verdict, idx)
                continue
            out.key, out.key_index = key, idx
            return out
        return out

    async def _lease_gate(
        self,
        route: ModelRoute,
        keys: list[KeyRef],
        needs: Needs,
        skip: SkipSets,
        now: float,
        scored: bool,
        lease_ttl: float,
        out: RouteCheck,
    ) -> RouteCheck:
        """:meth:`_gate`'s key loop when a lease is wanted: per key one store call
        (``acquire_route_lease``: the model's bench, the key's cooldown, its limits and the lease, a
        single round trip on a shared store), with the diagnostics :meth:`check` would give."""
        label = route.label
        mscope = model_scope(route.provider, route.model)
        limits = self.learned.effective(route)
        asked_store = False
        for idx, key, scope in self._candidate_keys(route, keys, skip, scored, out):
            asked_store = True
            attempt = await self._store.acquire_route_lease(
                scope, needs.estimate, now, lease_ttl, limits, (mscope, scope)
            )
            if attempt.lease_id is not None:
                out.key, out.key_index, out.lease_id = key, idx, attempt.lease_id
                return out
            if attempt.cooling is not None:
                cooled, record = attempt.cooling
                if cooled == mscope:  # the whole model is benched: that is the route's one reason
                    out.diagnostics[:] = [_benched(label, record, now)]
                    out.frees_at = None
                    return out
                kind = "learned_limit" if record.source == LEARNED else "cooldown"
                detail = f"key{idx + 1} cooling down for {record.until - now:.0f}s"
                out.diagnostics.append(RouteDiagnostic(label, kind, detail))
                continue
            # A refused lease is a key at its limit (possibly because another replica just took the slot).
            _at_limit(out, check_limits(limits, attempt.usage, needs.estimate), idx)
        if not asked_store:  # every key skipped or disabled: the bench still names the route's state
            bench = await self._store.get_cooldown(mscope, now)
            if bench is not None:
                out.diagnostics[:] = [_benched(label, bench, now)]
        return out

    def _candidate_keys(
        self, route: ModelRoute, keys: list[KeyRef], skip: SkipSets, scored: bool, out: RouteCheck
    ) -> Iterator[tuple[int, KeyRef, str]]:
        """The route's keys in the order to try them, as (index, key, scope), leaving out those this
        request already failed on and those the health pass disabled (noted in ``out``)."""
        health = self.health
        for idx, key in self._key_order(route, keys, scored):
            scope = key_scope(route.provider, route.model, key.key_id)
            if scope in skip.keys:
                continue
            if not health.usable(route.provider, key.key_id):
                status = health.status(route.provider, key.key_id)
                out.diagnostics.append(RouteDiagnostic(route.label, "key_disabled", f"key{idx + 1} is {status}"))
                continue
            yield idx, key, scope

    def _key_order(self, route: ModelRoute, keys: list[KeyRef], scored: bool) -> list[tuple[int, KeyRef]]:
        """Round-robin from the route's turn; under a scored strategy, by the keys' statistics."""
        start = self._rr.get(route.label, 0)
        n = len(keys)
        if not scored or n < 2:
            return [((start + i) % n, keys[(start + i) % n]) for i in range(n)]
        index = {key_scope(route.provider, route.model, k.key_id): i for i, k in enumerate(keys)}
        snap = self.stats.snapshot(time.time())
        ordered = order_keys(list(index), snap.keys, self._rng, start)
        return [(index[s], keys[index[s]]) for s in ordered]


def _benched(label: str, bench: CooldownRecord, now: float) -> RouteDiagnostic:
    return RouteDiagnostic(label, "cooldown", f"model benched for {bench.until - now:.0f}s")


def _at_limit(out: RouteCheck, verdict: LimitVerdict, idx: int) -> None:
    out.diagnostics.append(RouteDiagnostic(out.route.label, verdict.reason or "rpm", f"key{idx + 1} at its limit"))
    retry_at = verdict.retry_at
    if retry_at is not None and (out.frees_at is None or retry_at < out.frees_at):
        out.frees_at = retry_at


def _capability_gap(route: ModelRoute, needs: Needs) -> tuple[str, str] | None:
    if needs.tools and not route.tools:
        return "no_tools", "does not support tools"
    if needs.vision and not route.vision:
        return "no_vision", "does not support images"
    if route.context_window is not None and needs.estimate > route.context_window:
        return "too_large", f"< estimated {needs.estimate} tokens (context {route.context_window})"
    tpm = route.limits.tpm
    if tpm is not None and needs.estimate > tpm:
        return "too_large", f"< estimated {needs.estimate} tokens (tpm {tpm})"
    return None
