"""The token budget guardrail (spec/core.md §9; ``limits.request_max_tokens_budget``, 0 = off).

The input estimate (text and images, after the profile prompt and image shrink) plus the output the
client asked for must fit the budget, and the input alone must leave room: otherwise 413
``request_token_budget`` before any upstream call. A request that asked for no output limit goes
upstream with min(remaining budget, ``budget_default_output``) — or the surface's own default when that
is smaller — so the answer cannot overrun the budget either.
"""

from __future__ import annotations

from freellm.config import LimitsConfig
from freellm.core.tokens import estimate_input_tokens
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft
from freellm.errors import ClientError

__all__ = ["BudgetStage"]


class BudgetStage:
    name = "budget"

    def __init__(self, limits: LimitsConfig, *, image_tokens: int) -> None:
        self._limits = limits
        self._image_tokens = image_tokens

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft:
        budget = self._limits.request_max_tokens_budget
        req = draft.req
        used = estimate_input_tokens(req, image_tokens=self._image_tokens)
        asked = ctx.output_limit_asked if ctx.output_limit_asked is not None else req.max_tokens is not None
        if asked and req.max_tokens is not None:
            if used + req.max_tokens > budget:
                raise _over(f"the input (~{used} tokens) plus max_tokens {req.max_tokens} exceed", budget)
            return draft
        if used >= budget:
            raise _over(f"the input alone (~{used} tokens) fills", budget)
        cap = min(budget - used, self._limits.budget_default_output)
        if req.max_tokens is not None:
            cap = min(cap, req.max_tokens)  # a surface's own default that is already smaller
        if cap == req.max_tokens:
            return draft
        return Draft(req.replace(max_tokens=cap), draft.plan, draft.needs)


def _over(what: str, budget: int) -> ClientError:
    return ClientError(
        413,
        f"Request over the token budget (request_token_budget): {what} the budget of {budget} tokens. "
        "Send a shorter request or ask for fewer output tokens.",
        code="request_token_budget",
        param="max_tokens",
    )
