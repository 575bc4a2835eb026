"""One fusion request: a turn made of turns (ARCHITECTURE.md, the pre-routing pipeline section).

Every panel member and the judge is an ordinary :meth:`Engine.run_turn` — router, fallback loop,
cooldowns, limits — so fusion has no retry logic of its own: a member is a pinned route whose keys the
loop rotates; when the loop gives up, the next route of the refill pool takes the slot. This module
has no HTTP in it; :mod:`freellm.fusion.http` renders what it produces on each surface.

Budgets beyond the reference: ``panel_timeout_s`` cancels the members still running (the judge works
with what arrived) and ``max_cost_tokens`` stops dispatching once the estimated tokens of every call so
far reach it. A cancelled request (the client left) cancels every member and the judge at once; the
loop's own cancellation path releases their leases with no cooldown and no penalty.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from freellm.core.request import ChatRequest
from freellm.core.tokens import estimate_input_tokens, estimate_text_tokens, routing_estimate
from freellm.engine.context import CollectSink, RequestContext, Sink, TurnOutcome
from freellm.engine.pipeline.profile import model_allowed
from freellm.engine.turn import Engine
from freellm.errors import ClientError, Exhausted
from freellm.fusion.decide import Answer, Failure, Verdict, decide
from freellm.fusion.judge import judge_messages
from freellm.fusion.options import FusionOptions
from freellm.fusion.panel import PanelPlan, automatic_panel, explicit_panel
from freellm.routing.catalog import ModelRoute
from freellm.routing.router import Needs

__all__ = ["CallRecord", "FusionRun", "MemberResult"]

MemberStatus = Literal["ok", "error", "dropped"]

# Fields that only make sense with tools, dropped from the judge's request along with the tools.
_TOOL_ONLY_FIELDS = ("parallel_tool_calls",)


@dataclass(slots=True)
class MemberResult:
    """How one dispatched panel member (or a member dropped before or during the panel) settled."""

    seq: int
    """Dispatch order: the panel order of the answers."""
    route: ModelRoute | None
    name: str
    status: MemberStatus
    outcome: TurnOutcome | None = None
    error: str | None = None
    error_status: int | None = None
    retry_at_ms: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def provider(self) -> str | None:
        return self.route.provider if self.route is not None else None

    @property
    def model(self) -> str:
        return self.route.model if self.route is not None else self.name

    @property
    def label(self) -> str:
        return self.route.label if self.route is not None else self.name

    @property
    def text(self) -> str:
        return self.outcome.result.text if self.outcome is not None else ""


@dataclass(slots=True)
class CallRecord:
    """One sub-call (a member or the judge) for the request log."""

    role: Literal["panel", "judge"]
    ctx: RequestContext
    req: ChatRequest
    outcome: TurnOutcome | None
    error: BaseException | None


CallHook = Callable[[CallRecord], Awaitable[None]]
SettledHook = Callable[[MemberResult], Awaitable[None]]


@dataclass(slots=True)
class _Spend:
    """Tokens of the calls so far: actual for finished ones, estimated input for running ones."""

    done: int = 0
    running: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def book(self, tokens_in: int, tokens_out: int) -> None:
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        self.done += tokens_in + tokens_out


@dataclass(slots=True)
class FusionRun:
    engine: Engine
    options: FusionOptions
    ctx: RequestContext
    req: ChatRequest
    """The request after the pipeline's prompt stages (compression, profile prompt, images, budget)."""
    on_call: CallHook | None = None
    spend: _Spend = field(default_factory=_Spend)

    # ---- the panel ------------------------------------------------------------------------------------

    async def plan_panel(self) -> PanelPlan:
        """The panel and its refill pool; a 400 when no member is left or the judge is unknown."""
        options = self.options
        router = self.engine.router
        catalog = router.catalog
        req = self.req
        if options.judge is not None:
            try:
                router.plan(options.judge, self.ctx.profile)
            except ClientError as exc:
                raise ClientError(
                    400, f"Unknown fusion judge `{options.judge}`: {exc.message}", code="fusion_unknown_judge",
                    param=f"{options.param}.judge",
                ) from None
        if options.models:
            profile = self.ctx.bound_profile
            profiles = self.engine.settings.profiles
            return explicit_panel(
                options.models,
                catalog.member,
                k=options.k,
                cap=options.max_k,
                tools=bool(req.tools),
                vision=req.has_images,
                allowed=(lambda name: model_allowed(profiles[profile], name)) if profile is not None else _anything,
                param=f"{options.param}.models",
            )
        needs = self._needs(req)
        checks = await router.examine(router.plan("auto", self.ctx.profile), needs, time.time())
        candidates = [c.route for c in checks if c.key is not None]
        if not candidates:  # what `auto` would answer: a 429 with Retry-After while routes cool down
            raise await self.engine.loop.exhaustion_without_attempts(checks)
        return automatic_panel(candidates, k=options.k)

    async def run_panel(self, plan: PanelPlan, on_settled: SettledHook) -> list[MemberResult]:
        """Run the members in parallel; a member that gives up hands its slot to the next pool route.
        Returns every settled member in dispatch order (dropped explicit members first)."""
        results: list[MemberResult] = []
        for seq, d in enumerate(plan.dropped):
            dropped = MemberResult(seq=-len(plan.dropped) + seq, route=None, name=d.name, status="dropped", error=d.reason)
            results.append(dropped)
            await on_settled(dropped)
        pool = deque(plan.pool)
        running: dict[asyncio.Task[MemberResult], tuple[int, ModelRoute]] = {}
        loop = asyncio.get_running_loop()
        timeout = self.options.panel_timeout_s
        deadline = loop.time() + timeout if timeout > 0 else None
        seq = 0

        def dispatch(route: ModelRoute) -> None:
            nonlocal seq
            if not self._affordable(0):
                return
            req = self._member_request(route.label)
            estimate = estimate_input_tokens(req, image_tokens=self.engine.settings.routing.image_token_estimate)
            self.spend.running += estimate  # reserved now: the next dispatch sees it
            task = loop.create_task(self._member(seq, route, req, estimate), name=f"fusion-member:{route.label}")
            running[task] = (seq, route)
            seq += 1

        try:
            for route in plan.members:
                dispatch(route)
            while running:
                wait = None if deadline is None else max(0.0, deadline - loop.time())
                done, _ = await asyncio.wait(running, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    break  # the panel's time is up: the judge works with what arrived
                for task in sorted(done, key=lambda t: running[t][0]):
                    del running[task]
                    result = task.result()
                    results.append(result)
                    await on_settled(result)
                    if result.status == "error" and pool:
                        dispatch(pool.popleft())
        finally:
            late = dict(running)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        for task_seq, route in sorted(late.values(), key=lambda v: v[0]):
            timed_out = MemberResult(task_seq, route, route.label, "dropped", error="panel_timeout")
            results.append(timed_out)
            await on_settled(timed_out)
        return sorted(results, key=lambda r: r.seq)

    async def _member(self, seq: int, route: ModelRoute, req: ChatRequest, estimate: int) -> MemberResult:
        """One member's turn; ``estimate`` (its input tokens) was reserved at dispatch and is released
        here, whatever happens."""
        ctx = self._child(f"p{seq + 1}")
        try:
            outcome = await self.engine.run_turn(ctx, req, CollectSink())
        except (Exhausted, ClientError) as exc:
            await self._record("panel", ctx, req, None, exc)
            retry = exc.retry_at_ms if isinstance(exc, Exhausted) else None
            return MemberResult(
                seq, route, route.label, "error", error=exc.message, error_status=exc.status, retry_at_ms=retry
            )
        except asyncio.CancelledError as exc:
            await asyncio.shield(self._record("panel", ctx, req, None, exc))
            raise
        finally:
            self.spend.running -= estimate
        tokens_in = outcome.tokens_in or estimate
        self.spend.book(tokens_in, outcome.tokens_out)
        await self._record("panel", ctx, req, outcome, None)
        return MemberResult(
            seq, outcome.attempt.route, route.label, "ok", outcome=outcome, tokens_in=tokens_in,
            tokens_out=outcome.tokens_out,
        )

    # ---- the decision and the judge ---------------------------------------------------------------

    def verdict(self, results: list[MemberResult]) -> tuple[Verdict, list[MemberResult]]:
        """The decision over the settled panel, and the survivors (in panel order) it indexes."""
        survivors = [r for r in results if r.status == "ok" and r.outcome is not None]
        answers = [Answer(r.text, bool(r.outcome.result.tool_calls)) for r in survivors if r.outcome is not None]
        failures = [
            Failure(r.error_status or 502, r.retry_at_ms)
            for r in results
            if r.status == "error" or (r.status == "dropped" and r.route is not None)
        ]
        verdict = decide(answers, failures, strategy=self.options.strategy)
        if verdict.kind == "judge" and not self._affordable(self._judge_estimate(survivors)):
            verdict = decide(answers, failures, strategy="best_of")
        return verdict, survivors

    def judge_request(self, survivors: list[MemberResult], *, stream: bool) -> ChatRequest:
        req = self.req
        changes: dict[str, object] = {
            "model": self.options.judge or "auto",
            "messages": judge_messages([m.wire() for m in req.messages], [s.text for s in survivors]),
            "tools": None,
            "tool_choice": None,
            "stream": stream,
            "stream_options": {"include_usage": True} if stream else None,
        }
        extra = req.__pydantic_extra__ or {}
        for name in ("fusion", *_TOOL_ONLY_FIELDS):
            if name in extra:
                changes[name] = None
        return req.replace(**changes)

    async def run_judge(self, req: ChatRequest, sink: Sink) -> TurnOutcome:
        """The judge's turn (``auto``, or pinned to the configured judge). Raises what the loop raises."""
        ctx = self._child("judge")
        estimate = estimate_input_tokens(req, image_tokens=self.engine.settings.routing.image_token_estimate)
        try:
            outcome = await self.engine.run_turn(ctx, req, sink)
        except (Exhausted, ClientError) as exc:
            await self._record("judge", ctx, req, None, exc)
            raise
        except asyncio.CancelledError as exc:
            await asyncio.shield(self._record("judge", ctx, req, None, exc))
            raise
        self.spend.book(outcome.tokens_in or estimate, outcome.tokens_out)
        await self._record("judge", ctx, req, outcome, None)
        return outcome

    def usage(self) -> dict[str, int]:
        """Usage summed over every call so far."""
        s = self.spend
        return {"prompt_tokens": s.tokens_in, "completion_tokens": s.tokens_out, "total_tokens": s.tokens_in + s.tokens_out}

    # ---- helpers ---------------------------------------------------------------------------------------

    def _member_request(self, label: str) -> ChatRequest:
        changes: dict[str, object] = {"model": label, "stream": False, "stream_options": None}
        if "fusion" in (self.req.__pydantic_extra__ or {}):
            changes["fusion"] = None
        return self.req.replace(**changes)

    def _needs(self, req: ChatRequest) -> Needs:
        routing = self.engine.settings.routing
        estimate = routing_estimate(
            req,
            reserve_default=routing.output_reserve_default,
            reserve_cap=routing.output_reserve_cap,
            image_tokens=routing.image_token_estimate,
        )
        return Needs(estimate=estimate, tools=bool(req.tools), vision=req.has_images)

    def _judge_estimate(self, survivors: list[MemberResult]) -> int:
        answers = sum(estimate_text_tokens(len(s.text)) for s in survivors)
        longest = max((estimate_text_tokens(len(s.text)) for s in survivors), default=0)
        return self.req.text_token_estimate + answers + longest

    def _affordable(self, more: int) -> bool:
        """Whether another call may start: the budget is off, or not yet reached with ``more``."""
        cap = self.options.max_cost_tokens
        if cap <= 0:
            return True
        spent = self.spend.done + self.spend.running
        return spent < cap and (more == 0 or spent + more <= cap)

    def _child(self, suffix: str) -> RequestContext:
        """A sub-call's own context: its own clock (the loop's time budget is per turn), the parent's
        client and profile, nothing of the parent's cache or session."""
        parent = self.ctx
        return RequestContext(
            request_id=f"{parent.request_id}.{suffix}",
            surface="fusion",
            started=asyncio.get_running_loop().time(),
            started_wall=time.time(),
            client_id=parent.client_id,
            bound_profile=parent.bound_profile,
            profile=parent.profile,
        )

    async def _record(
        self,
        role: Literal["panel", "judge"],
        ctx: RequestContext,
        req: ChatRequest,
        outcome: TurnOutcome | None,
        error: BaseException | None,
    ) -> None:
        if self.on_call is not None:
            await self.on_call(CallRecord(role, ctx, req, outcome, error))


def _anything(name: str) -> bool:
    return True
