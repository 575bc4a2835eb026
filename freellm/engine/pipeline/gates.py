"""Estimate and capability gates: resolve the routes, size the request, refuse what no route can serve.

Images with no vision-capable route → 422 ``no_vision_model``; tools with no tool-capable route → 422
``no_tools_model`` (spec/core.md §9). An unknown model is the router's 404. The routing estimate (input
+ output reserve) rides on the draft for the router's context and TPM checks.
"""

from __future__ import annotations

from freellm.config import Settings
from freellm.core.tokens import routing_estimate
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft
from freellm.errors import ClientError
from freellm.routing.router import Needs, Router

__all__ = ["GatesStage", "plan_draft"]


def plan_draft(draft: Draft, settings: Settings, router: Router, profile: str | None = None) -> Draft:
    req = draft.req
    plan = router.plan(req.requested_model, profile)
    routing = settings.routing
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
            raise ClientError(422, "No model in this route set accepts images.", code="no_vision_model", param="messages")
        if needs.tools and not any(r.tools for r in plan.routes):
            raise ClientError(422, "No model in this route set supports tools.", code="no_tools_model", param="tools")
    return Draft(req, plan, needs)


class GatesStage:
    name = "gates"

    def __init__(self, settings: Settings, router: Router) -> None:
        self._settings = settings
        self._router = router

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft:
        return plan_draft(draft, self._settings, self._router, ctx.profile)
