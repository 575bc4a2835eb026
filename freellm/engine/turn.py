"""One turn through the engine: the pre-routing pipeline, then the fallback loop.

Every surface calls :meth:`Engine.prepare` (compression, gates, cache lookup… — see
:mod:`freellm.engine.pipeline`) and then :meth:`Engine.run_turn` with its own sink, so the pipeline,
routing, retries and the pump are written once.
"""

from __future__ import annotations

from freellm.config import Settings
from freellm.core.embeddings import EmbeddingRequest
from freellm.core.request import ChatRequest
from freellm.engine.context import Attempt, RequestContext, Sink, TurnOutcome
from freellm.engine.driver import drive_attempt
from freellm.engine.embeddings import EmbeddingTurn, run_embeddings
from freellm.engine.fallback import FallbackLoop
from freellm.engine.pipeline import Draft, Pipeline, Replay
from freellm.engine.pipeline.gates import plan_draft
from freellm.routing.router import Router

__all__ = ["Engine"]

_COUNT_STAGES = frozenset({"compress", "profile"})
"""What a count-tokens request goes through: what changes the prompt, nothing that routes."""
_FUSION_STAGES = frozenset({"compress", "profile", "images", "budget"})
"""What a fusion request goes through before its panel: the prompt stages and the token budget; each
member and the judge then route (and are gated) as turns of their own."""


class Engine:
    def __init__(self, settings: Settings, router: Router, loop: FallbackLoop, pipeline: Pipeline) -> None:
        self.settings = settings
        self.router = router
        self.loop = loop
        self.pipeline = pipeline

    async def prepare(self, ctx: RequestContext, req: ChatRequest) -> Draft | Replay:
        """Run the pre-routing pipeline: the request to route, or a cached answer that ends the turn."""
        return await self.pipeline.run(ctx, req)

    async def after_turn(self, ctx: RequestContext, draft: Draft, outcome: TurnOutcome) -> None:
        """What the pipeline remembers of a successful turn (sessions); never fails the reply."""
        if outcome.committed_error is None:
            await self.pipeline.after_turn(ctx, draft, outcome)

    async def counted_request(self, ctx: RequestContext, req: ChatRequest) -> ChatRequest:
        """The prompt as it would go upstream — compressed, with the profile's system prompt — for the
        count-tokens routes."""
        draft = await self.pipeline.run(ctx, req, only=_COUNT_STAGES)
        assert isinstance(draft, Draft)
        return draft.req

    async def fusion_request(self, ctx: RequestContext, req: ChatRequest) -> ChatRequest:
        """The request a fusion panel is sent: compressed, profiled, images checked, within budget."""
        draft = await self.pipeline.run(ctx, req, only=_FUSION_STAGES)
        assert isinstance(draft, Draft)
        return draft.req

    async def run_turn(self, ctx: RequestContext, turn: Draft | ChatRequest, sink: Sink) -> TurnOutcome:
        """Route and run the fallback loop. A bare request (no pipeline run) is planned and gated here."""
        draft = turn if isinstance(turn, Draft) else Draft(turn)
        if draft.plan is None or draft.needs is None:
            draft = plan_draft(draft, self.settings, self.router, ctx.profile)
        assert draft.plan is not None and draft.needs is not None
        async def attempt(a: Attempt) -> TurnOutcome:
            return await drive_attempt(a, draft.request_for(a.route), sink, self.settings)

        return await self.loop.run(ctx, draft.plan, draft.needs, attempt)

    async def embed(self, ctx: RequestContext, req: EmbeddingRequest) -> EmbeddingTurn:
        """An embeddings turn: no pre-routing pipeline (nothing in it applies to embeddings), the same
        router and fallback loop, kept inside the requested family."""
        return await run_embeddings(self.settings, self.router, self.loop, ctx, req)
