"""Sticky sessions, context handoff and reasoning memory: the last stage before routing (spec/core.md §8).

* **Sticky.** A conversation that already holds an assistant turn tries the route that last served it
  first (the router still skips it while it cools down or is at its limits, then follows chain order);
  a pin is never reordered. ``X-FreeLLM-Session: sticky|new`` on every success says which happened.
* **Context handoff** (``sessions.context_handoff: on_model_switch``; never for a pin). When the route
  about to be called is not the one that last served the session, that attempt's request gets one
  system message naming the switch and carrying the recent turns — built from the request as the
  client sent it for each attempt, so a request that fails over twice still carries exactly one.
* **Reasoning memory.** The same route called again for the session gets its remembered reasoning back
  on the newest assistant turn when the client dropped it (outbound copy only; never another route's).

After a success :meth:`SessionStage.after_turn` stores what the next turn needs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from freellm.config import SessionsConfig
from freellm.core.request import ChatRequest
from freellm.core.tokens import estimate_text_tokens
from freellm.engine.context import RequestContext, TurnOutcome
from freellm.engine.pipeline import Draft
from freellm.routing.catalog import ModelRoute
from freellm.routing.router import Needs
from freellm.routing.sessions import (
    SessionMemory,
    handoff_message,
    has_assistant_turn,
    next_memory,
    session_key,
    with_handoff,
    with_reasoning,
)

__all__ = ["SessionStage"]


class SessionStage:
    name = "session"

    def __init__(self, memory: SessionMemory) -> None:
        self._memory = memory
        self._cfg: SessionsConfig = memory.cfg

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft:
        req = draft.req
        scope = f"{ctx.client_id or '-'}\x1f{ctx.profile or '-'}"
        key = session_key(scope=scope, model=req.requested_model, header=ctx.session_header, messages=req.messages)
        if key is None:
            return draft
        ctx.session_key = key
        if not has_assistant_turn(req.messages):
            return draft  # a new conversation: chain order, and nothing to hand off
        doc = await self._memory.get(key)
        if doc is None or draft.plan is None or draft.needs is None:
            return draft
        cfg = self._cfg
        plan, needs = draft.plan, draft.needs
        previous = doc.get("route")
        if not isinstance(previous, str):
            return draft
        if cfg.sticky and not plan.pinned:
            first = [r for r in plan.routes if r.label == previous]
            if first:
                ctx.sticky_route = previous
                plan = dataclasses.replace(plan, preferred=previous)
        handoff = cfg.context_handoff == "on_model_switch" and not plan.pinned and bool(doc.get("turns"))
        if handoff:
            size = len(handoff_message(previous, previous, doc["turns"], cfg.handoff_max_chars))
            needs = Needs(needs.estimate + estimate_text_tokens(size), needs.tools, needs.vision)
        reasoning = doc.get("reasoning") if cfg.reasoning_memory else None
        if not handoff and not isinstance(reasoning, dict):
            return Draft(req, plan, needs)
        return Draft(req, plan, needs, _PerRoute(ctx, req, previous, doc, cfg, handoff, reasoning))

    async def after_turn(self, ctx: RequestContext, draft: Draft, outcome: TurnOutcome) -> None:
        key = ctx.session_key
        if key is None:
            return
        result = outcome.result
        doc = next_memory(
            route=outcome.attempt.route.label,
            messages=draft.req.messages,
            answer=result.text,
            tool_call_ids=[tc.id for tc in result.tool_calls],
            reasoning=result.reasoning,
            signature=result.reasoning_signature,
            cfg=self._cfg,
        )
        await self._memory.put(key, doc)


class _PerRoute:
    """The request each route gets; computed once per route within the request."""

    def __init__(
        self,
        ctx: RequestContext,
        req: ChatRequest,
        previous: str,
        doc: dict[str, Any],
        cfg: SessionsConfig,
        handoff: bool,
        reasoning: Any,
    ) -> None:
        self._ctx, self._req, self._previous, self._doc, self._cfg = ctx, req, previous, doc, cfg
        self._handoff = handoff
        self._reasoning: dict[str, Any] | None = reasoning if isinstance(reasoning, dict) else None
        self._done: dict[str, tuple[ChatRequest, str | None]] = {}

    def __call__(self, route: ModelRoute) -> ChatRequest:
        done = self._done.get(route.label)
        if done is None:
            done = self._done[route.label] = self._build(route)
        self._ctx.handoff = done[1]
        return done[0]

    def _build(self, route: ModelRoute) -> tuple[ChatRequest, str | None]:
        messages: list[dict[str, Any]] | None = None
        switched: str | None = None
        if self._handoff and route.label != self._previous:
            text = handoff_message(self._previous, route.label, self._doc["turns"], self._cfg.handoff_max_chars)
            messages = with_handoff([m.wire() for m in self._req.messages], text)
            if messages is not None:
                switched = f"{self._previous} → {route.label}"
        memory = self._reasoning
        if memory is not None and memory.get("route") == route.label:
            restored = with_reasoning(messages or [m.wire() for m in self._req.messages], memory)
            if restored is not None:
                messages = restored
        if messages is None:
            return self._req, None
        return self._req.replace(messages=messages), switched
