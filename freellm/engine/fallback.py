"""The unified fallback loop, shared by every surface.

It asks the router for a (route, key), runs the surface's attempt, and on a failure decides — from the
failure class alone — what to skip, whether to cool the key down, and whether to go on. It owns the
attempt limit, the wall-clock budget and hedge, the breaker, the trail and the exhaustion ladder.
Cancellation (client gone) passes straight through: no cooldown, no penalty, lease released.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from freellm.config import Settings
from freellm.engine.context import Attempt, RequestContext, TurnOutcome
from freellm.engine.continuation import StreamDied
from freellm.engine.driver import HedgeExpired
from freellm.engine.exhaustion import exhausted_after_attempts, exhausted_without_attempts
from freellm.engine.failure import Failure, FailureKind, classify
from freellm.errors import Exhausted, TrailEntry, UpstreamError
from freellm.routing.cooldowns import bench_decision, decide_cooldown
from freellm.routing.health import HEALTH_SETTING
from freellm.routing.learned import (
    LEARNED_SETTING,
    blocks_from_headers,
    blocks_from_text,
    has_rate_limit_headers,
    readings,
    text_limits,
)
from freellm.routing.router import LEARNED, RETIRED, Needs, Plan, RouteCheck, Router, SkipSets
from freellm.store.base import CooldownRecord, StateStore, key_scope, model_scope

__all__ = ["FallbackLoop"]

RunAttempt = Callable[[Attempt], Awaitable[TurnOutcome]]

_DAY = 86400.0
_HOUR = 3600.0
_RETIRED_S = 10 * 365 * _DAY
"""A retirement is a model-scope cooldown that outlives any deployment."""


_STREAKS = ("ladder", "rate_limit", "empty_length")
"""The failure streaks a success ends (cleared by ``settle_lease``)."""


class _Booking:
    """One attempt's success, booked once (:attr:`Attempt.settle`): by the stream before its terminator,
    or by the loop when the outcome comes back."""

    __slots__ = ("_attempt", "_done", "_loop", "_started", "settled")

    def __init__(self, loop: FallbackLoop, attempt: Attempt, started: float) -> None:
        self._loop = loop
        self._attempt = attempt
        self._started = started
        self._done = False
        self.settled = False
        """The lease was released by the booking (settle_lease)."""

    async def settle(self, outcome: TurnOutcome) -> None:
        if self._done:
            return
        self._done = True
        self.settled = await self._loop._on_success(self._attempt, outcome, self._started)


@dataclass(slots=True)
class _LoopState:
    trail: list[TrailEntry] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skip: SkipSets = field(default_factory=SkipSets)
    key_ordinals: dict[str, int] = field(default_factory=dict)
    consecutive_failures: int = 0
    breaker_tripped: bool = False
    budget_ran_out: bool = False


class FallbackLoop:
    def __init__(self, settings: Settings, router: Router, store: StateStore) -> None:
        self._settings = settings
        self._router = router
        self._store = store

    async def run(self, ctx: RequestContext, plan: Plan, needs: Needs, run_attempt: RunAttempt) -> TurnOutcome:
        cfg = self._settings.fallback
        loop = asyncio.get_running_loop()
        state = _LoopState()
        budget = cfg.time_budget_s
        died: StreamDied | None = None
        """A committed stream waiting for a route to continue it (stream.continue_on_failure)."""
        for number in range(cfg.max_attempts):
            deadline = None
            if number >= 2 and budget > 0:
                deadline = ctx.started + budget
                if loop.time() >= deadline:
                    state.budget_ran_out = True
                    break
            pick = await self._router.pick(plan, needs, state.skip, time.time())
            if pick.choice is None:
                if number == 0:
                    raise exhausted_without_attempts(
                        pick.diagnostics,
                        retry_at_ms=await self._soonest_retry_ms(pick.window_frees_at),
                        now_ms=int(time.time() * 1000),
                    )
                break
            route, key = pick.choice
            key_n = state.key_ordinals.setdefault(f"{route.provider}\x1f{key.key_id}", len(state.key_ordinals) + 1)
            attempt = Attempt(
                number=number,
                route=route,
                provider=self._router.provider(route.provider),
                key=key.secret,
                key_id=key.key_id,
                key_n=key_n,
                lease_id=pick.lease_id,
                trail=state.trail,
                deadline=deadline,
                resume=died.resume if died is not None else None,
            )
            started = loop.time()
            booking = _Booking(self, attempt, started)
            attempt.settle = booking.settle
            try:
                try:
                    outcome = await run_attempt(attempt)
                except StreamDied as dead:
                    # Booked like a failure before commit (cooldown, skip); then the next route the
                    # loop picks continues the answer — never for a pin, which has no other route.
                    died = dead
                    if plan.pinned or await self._failed_after_commit(ctx, state, attempt, dead.error, started):
                        break
                    continue
                except UpstreamError as err:
                    book = self._on_failure if died is None else self._failed_after_commit
                    if await book(ctx, state, attempt, err, started):
                        break
                    continue
                except HedgeExpired:
                    # No cooldown or penalty (the budget ran out, not the provider), but it *is* the last
                    # error: exhaustion must not be decided by an earlier attempt's failure.
                    hedged = classify(UpstreamError("time budget exhausted", timeout=True))
                    state.trail.append(self._entry(ctx, attempt, hedged.error_class, hedged.message, started))
                    state.failures.append(hedged)
                    state.budget_ran_out = True
                    break
                await booking.settle(outcome)  # unless the sink already did, before its terminator
                return outcome
            finally:
                # A success releases its lease in the same step that counts it (settle_lease): never
                # before, or another replica would see the request neither leased nor counted.
                if not booking.settled:
                    await self._store.release_lease(key_scope(route.provider, route.model, key.key_id), pick.lease_id)
        if died is not None:  # no route could continue it: the in-band error, as without continuation
            return await died.give_up()
        raise exhausted_after_attempts(
            state.trail,
            state.failures,
            breaker_tripped=state.breaker_tripped,
            retry_at_ms=await self._soonest_retry_ms(),
            budget_ran_out=state.budget_ran_out,
            budget_s=budget or None,
            now_ms=int(time.time() * 1000),
        )

    async def _on_failure(
        self, ctx: RequestContext, state: _LoopState, attempt: Attempt, err: UpstreamError, started: float
    ) -> bool:
        """Book one failed attempt. Returns True when the loop must stop."""
        failure = classify(err, secrets=(attempt.key,))
        route = attempt.route
        now = time.time()
        scope = key_scope(route.provider, route.model, attempt.key_id)
        message = failure.message
        state.trail.append(self._entry(ctx, attempt, failure.error_class, message, started))
        state.failures.append(failure)
        state.skip.keys.add(scope)
        self._router.stats.observe(route.label, scope, ok=False, now=now, rate_limited=failure.rate_limit_signal)
        await self._learn(attempt, scope, err.headers, err.message if failure.rate_limit_signal else None, now)
        if failure.retirement is not None:
            await self._retire(attempt, failure.retirement, now)
        if failure.kind is FailureKind.FATAL:
            raise Exhausted(
                status=502,
                type="provider_error",
                code="provider_error",
                message=f"Provider error ({route.provider}): {message}",
                trail=list(state.trail),
            )
        if failure.skip_model:
            state.skip.models.add(route.label)
        if failure.skip_provider:
            state.skip.providers.add(route.provider)
        exempt = failure.skip_bench
        if err.skip_bench and failure.error_class == "empty_completion":
            # An empty `length` reply is exempt only until it happens 3 times in a row on this key.
            streak = await self._store.add_event("empty_length", scope, now, _DAY)
            exempt = streak < self._settings.fallback.empty_length_streak
        if exempt:
            return False
        await self._cool_down(attempt, failure, scope, now)
        cfg = self._settings.fallback
        if cfg.max_consecutive_upstream_fails > 0:
            state.consecutive_failures += 1
            if state.consecutive_failures >= cfg.max_consecutive_upstream_fails:
                state.breaker_tripped = True
                return True
        return False

    async def _failed_after_commit(
        self, ctx: RequestContext, state: _LoopState, attempt: Attempt, err: UpstreamError, started: float
    ) -> bool:
        """:meth:`_on_failure` for a stream that died after commit: a fatal class stops the loop (the
        stream then ends in-band) instead of raising a refusal the client can no longer get."""
        try:
            return await self._on_failure(ctx, state, attempt, err, started)
        except Exhausted:
            return True

    async def _cool_down(self, attempt: Attempt, failure: Failure, scope: str, now: float) -> None:
        cfg = self._settings.fallback
        route = attempt.route
        usage = await self._store.usage(scope, now)
        limits = route.limits
        daily_exhausted = bool(
            (limits.rpd is not None and usage.requests_day >= limits.rpd)
            or (limits.tpd is not None and usage.tokens_day >= limits.tpd)
        )
        ladder_hits = await self._store.count_events("ladder", scope, now, _DAY)
        if failure.rate_limit_signal:
            rl_hits = await self._store.add_event("rate_limit", scope, now, _HOUR)
        else:
            rl_hits = await self._store.count_events("rate_limit", scope, now, _HOUR)
        decision = decide_cooldown(
            failure,
            now=now,
            is_local=route.is_local,
            cfg=cfg,
            daily_exhausted=daily_exhausted,
            limits_unknown=limits.rpd is None and limits.tpd is None,
            ladder_hits_24h=ladder_hits,
            rate_limit_hits_1h=rl_hits,
        )
        if decision is None:
            return
        await self._store.set_cooldown(
            scope, CooldownRecord(until=now + decision.seconds, source=decision.source, reason=failure.error_class)
        )
        if decision.escalated:
            await self._store.add_event("ladder", scope, now, _DAY)
        if failure.kind is not FailureKind.RETRYABLE:
            return
        mscope = model_scope(route.provider, route.model)
        recent = await self._store.add_event("bench", mscope, now, cfg.model_bench_window_s)
        bench = bench_decision(recent, cfg)
        if bench is not None:
            await self._store.set_cooldown(mscope, CooldownRecord(until=now + bench, source="bench"))

    async def _on_success(self, attempt: Attempt, outcome: TurnOutcome, started: float) -> bool:
        """Book a turn that reached the client; True when its lease was settled (released) here."""
        route = attempt.route
        scope = key_scope(route.provider, route.model, attempt.key_id)
        now = time.time()
        router = self._router
        duration_ms = int((asyncio.get_running_loop().time() - started) * 1000)
        ok = outcome.committed_error is None
        router.stats.observe(
            route.label, scope, ok=ok, now=now, ttfb_ms=outcome.ttfb_ms, duration_ms=duration_ms,
            tokens_out=outcome.tokens_out,
        )
        headers = outcome.upstream_headers
        if headers is not None and has_rate_limit_headers(headers):  # most answers carry none
            await self._learn(attempt, scope, headers, None, now)
        if ok and router.health.served(route.provider, attempt.key_id):
            await self._store.set_setting(HEALTH_SETTING, router.health.dump())
        if outcome.committed_error is not None:
            failure = classify(outcome.committed_error, secrets=(attempt.key,))
            if not failure.skip_bench:
                await self._cool_down(attempt, failure, scope, now)
            return False
        await self._store.settle_lease(scope, attempt.lease_id, outcome.tokens_in + outcome.tokens_out, now, _STREAKS)
        return True

    async def exhaustion_without_attempts(self, checks: list[RouteCheck]) -> Exhausted:
        """The exhaustion a request gets when no route can be tried (``Router.examine`` found none)."""
        frees = [c.frees_at for c in checks if c.frees_at is not None]
        return exhausted_without_attempts(
            [d for c in checks for d in c.diagnostics],
            retry_at_ms=await self._soonest_retry_ms(min(frees) if frees else None),
            now_ms=int(time.time() * 1000),
        )

    async def _learn(
        self, attempt: Attempt, scope: str, headers: Mapping[str, str] | None, limit_text: str | None, now: float
    ) -> None:
        """What the provider said about its windows: a spent one keeps the key out until it resets,
        a stated limit is learned (see :mod:`freellm.routing.learned`)."""
        windows = readings(headers, now)
        stated = text_limits(limit_text) if limit_text else []
        if not windows and not stated:
            return
        learned = self._router.learned
        changed = learned.learn_headers(attempt.route, windows) | learned.learn_text(attempt.route, stated)
        for block in [*blocks_from_headers(windows, now), *blocks_from_text(stated, now)]:
            await self._store.set_cooldown(
                scope, CooldownRecord(until=block.until, source=LEARNED, reason=f"{block.axis} window spent")
            )
        if changed:
            await self._store.set_setting(LEARNED_SETTING, learned.dump())

    async def _retire(self, attempt: Attempt, how: str, now: float) -> None:
        """A 410 or an end-of-life answer retires the model; a "no longer available" 404 does on its
        second within an hour. A retired model is never routed again (until the operator acts)."""
        route = attempt.route
        mscope = model_scope(route.provider, route.model)
        if how != "gone" and await self._store.add_event("gone", mscope, now, _HOUR) < 2:
            return
        await self._store.set_cooldown(mscope, CooldownRecord(until=now + _RETIRED_S, source=RETIRED, reason="retired"))
        self._router.retired.add(route.label)

    async def _soonest_retry_ms(self, window_frees_at: float | None = None) -> int | None:
        """Soonest moment a route may serve again: any cooldown's end, or a full rate window freeing."""
        active = await self._store.active_cooldowns(time.time())
        candidates = [r.until for r in active.values() if r.source != RETIRED]
        if window_frees_at is not None:
            candidates.append(window_frees_at)
        return int(min(candidates) * 1000) if candidates else None

    @staticmethod
    def _entry(ctx: RequestContext, attempt: Attempt, error_class: str, message: str, started: float) -> TrailEntry:
        loop_now = asyncio.get_running_loop().time()
        return TrailEntry(
            provider=attempt.route.provider,
            model=attempt.route.model,
            key_n=attempt.key_n,
            error_class=error_class,
            message=message,
            started_ms=int((started - ctx.started) * 1000),
            duration_ms=int((loop_now - started) * 1000),
        )


