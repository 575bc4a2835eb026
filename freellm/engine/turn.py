"""One turn through the engine: plan the routes, apply the capability gates, run the fallback loop.

Every surface calls :func:`run_turn` with a canonical request and its own sink, so routing, retries
and the pump are written once.
"""

from __future__ import annotations

from freellm.config import Settings
from freellm.core.request import ChatRequest
from freellm.core.tokens import routing_estimate
from freellm.engine.context import Attempt, RequestContext, Sink, TurnOutcome
from freellm.engine.driver import drive_attempt
from freellm.engine.fallback import FallbackLoop
from freellm.errors import ClientError
from freellm.routing.router import Needs, Router

__all__ = ["Engine"]


class Engine:
    def __init__(self, settings: Settings, router: Router, loop: FallbackLoop) -> None:
        self.settings = settings
        self.router = router
        self.loop = loop

    async def run_turn(self, ctx: RequestContext, req: ChatRequest, sink: Sink) -> TurnOutcome:
        plan = self.router.plan(req.requested_model)
        routing = self.settings.routing
        needs = Needs(
            estimate=routing_estimate(
                req,
                reserve_default=routing.output_reserve_default,
                reserve_cap=routing.output_reserve_cap,
                image_tokens=routing.image_token_estimate,
            ),
            tools=bool(req.tools),
            vision=req.has_images,
        )
        if plan.routes:
            if needs.vision and not any(r.vision for r in plan.routes):
                raise ClientError(
                    422, "No model in this route set accepts images.", code="no_vision_model", param="messages"
                )
            if needs.tools and not any(r.tools for r in plan.routes):
                raise ClientError(422, "No model in this route set supports tools.", code="no_tools_model", param="tools")

        async def attempt(a: Attempt) -> TurnOutcome:
            return await drive_attempt(a, req, sink, self.settings)

        return await self.loop.run(ctx, plan, needs, attempt)
