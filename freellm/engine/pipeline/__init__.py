"""The pre-routing pipeline: the seed's request flow as one ordered list of small stages.

```
parse → compress → profile prompt → image shrink → estimate → gates (422) → budget (413)
      → cache lookup ─(hit: replay, done)→ session → route → fallback loop
```

A stage is an async callable over the typed :class:`~freellm.engine.context.RequestContext` and the
:class:`Draft` so far; it returns the draft to go on with (a stage that changes the request puts a new
:class:`~freellm.core.request.ChatRequest` in it — never mutating the old one) or, for the cache, a
:class:`Replay` that ends the turn. :func:`build_pipeline` lists the stages in order; a feature that is
off is not in the list, so it costs nothing. What happens *after* a turn (cache store, request log) are
hooks on the outcome in the server layer, never in the pump.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from freellm.core.request import ChatRequest
from freellm.engine.context import RequestContext

if TYPE_CHECKING:
    from freellm.cache.store import CachedReply
    from freellm.engine.context import TurnOutcome
    from freellm.routing.catalog import ModelRoute
    from freellm.routing.router import Needs, Plan

__all__ = ["Draft", "Pipeline", "Replay", "Stage"]


@dataclass(slots=True)
class Draft:
    """The turn being prepared: the request as the stages left it, and (after the gates) its routes."""

    req: ChatRequest
    plan: Plan | None = None
    needs: Needs | None = None
    for_route: Callable[[ModelRoute], ChatRequest] | None = None
    """The request one route gets, when it depends on the route (context handoff, reasoning memory):
    always derived from ``req``, so a failover never stacks one attempt's changes on another's."""

    def request_for(self, route: ModelRoute) -> ChatRequest:
        return self.req if self.for_route is None else self.for_route(route)


@dataclass(frozen=True, slots=True)
class Replay:
    """A cached answer that ends the turn: no routing, no upstream call, no quota."""

    reply: CachedReply


class Stage(Protocol):
    name: str

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft | Replay: ...


@runtime_checkable
class AfterTurn(Protocol):
    """A stage that also remembers something once a turn succeeded (sessions)."""

    async def after_turn(self, ctx: RequestContext, draft: Draft, outcome: TurnOutcome) -> None: ...


class Pipeline:
    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = tuple(stages)
        self._after: tuple[AfterTurn, ...] = tuple(s for s in stages if isinstance(s, AfterTurn))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    async def run(
        self, ctx: RequestContext, req: ChatRequest, *, only: frozenset[str] | None = None
    ) -> Draft | Replay:
        """Every stage in order, or only those named in ``only`` (count-tokens routes compress and
        stop there: nothing is routed)."""
        draft = Draft(req)
        for stage in self.stages:
            if only is not None and stage.name not in only:
                continue
            result = await stage(ctx, draft)
            if isinstance(result, Replay):
                return result
            draft = result
        return draft

    async def after_turn(self, ctx: RequestContext, draft: Draft, outcome: TurnOutcome) -> None:
        """Every stage's hook on a successful turn (the outcome carries no in-band error)."""
        for stage in self._after:
            await stage.after_turn(ctx, draft, outcome)
