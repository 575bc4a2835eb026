"""One embeddings turn: the family's routes through the same fallback loop as chat.

The loop brings everything a chat turn has — key rotation, cooldowns and the ladder, rate windows and
leases, learned limits, the breaker, the time budget and the exhaustion ladder — and the router keeps
the plan inside one family (:meth:`~freellm.routing.router.Router.embedding_plan`), so a failover never
mixes vectors of two models. An attempt is one provider call; there is no stream and no commit point.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from freellm.config import Settings
from freellm.core.embeddings import EmbeddingAnswer, EmbeddingRequest
from freellm.engine.context import Attempt, RequestContext, TurnOutcome
from freellm.engine.driver import HedgeExpired, attempt_timeouts
from freellm.engine.fallback import FallbackLoop
from freellm.engine.pump import PumpResult
from freellm.errors import ClientError, UpstreamError
from freellm.providers.base import Embedder
from freellm.routing.router import Needs, Router

__all__ = ["EmbeddingTurn", "run_embeddings"]


@dataclass(frozen=True, slots=True)
class EmbeddingTurn:
    """A served embeddings request: the loop's outcome (route, trail, usage) and the vectors."""

    family: str
    outcome: TurnOutcome
    answer: EmbeddingAnswer


async def run_embeddings(
    settings: Settings, router: Router, loop: FallbackLoop, ctx: RequestContext, req: EmbeddingRequest
) -> EmbeddingTurn:
    """Route ``req`` in its family and run the loop. Raises ClientError (404 unknown model, 400 token
    input no member can take) or Exhausted, rendered by the surface in its envelope."""
    plan = router.embedding_plan(req.requested_model)
    family = plan.routes[0].family or req.requested_model
    if req.token_input:  # token ids mean nothing to a wire that wants text
        routes = [r for r in plan.routes if router.provider(r.provider).config.kind == "openai"]
        if not routes:
            raise ClientError(
                400,
                f"Token-array input needs an OpenAI-compatible member of `{family}`; send the text instead.",
                code="invalid_input",
                param="input",
            )
        plan = replace(plan, routes=routes)
    answers: list[EmbeddingAnswer] = []
    clock = asyncio.get_running_loop()

    async def attempt(a: Attempt) -> TurnOutcome:
        provider = a.provider
        if not isinstance(provider, Embedder):  # excluded by the config; kept as a clear failure
            raise UpstreamError(f"provider {a.route.provider} has no embeddings wire", status=400)
        started = clock.time()
        call = provider.embed(a.route.model, req, a.key, attempt_timeouts(settings, a))
        if a.deadline is None:
            answer = await call
        else:
            try:
                async with asyncio.timeout_at(a.deadline):
                    answer = await call
            except TimeoutError as exc:
                raise HedgeExpired() from exc
        answers.append(answer)
        return TurnOutcome(
            attempt=a,
            result=PumpResult(),
            ttfb_ms=int((clock.time() - started) * 1000),
            trail=a.trail,
            tokens_in=answer.prompt_tokens if answer.prompt_tokens is not None else req.token_estimate,
            upstream_headers=answer.headers,
        )

    outcome = await loop.run(ctx, plan, Needs(estimate=req.token_estimate), attempt)
    return EmbeddingTurn(family, outcome, answers[-1])
