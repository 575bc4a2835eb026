"""Serve ``model: "fusion"`` over HTTP on chat, Responses and Messages (docs/fusion.md).

The surface parses its wire and hands over its renderers; :func:`respond_fusion` runs the prompt
stages, plans and runs the panel (:class:`~freellm.fusion.run.FusionRun`), decides, runs the judge and
renders the outcome with the surface's own renderers — so a fusion answer is that surface's ordinary
object or stream, plus the additive ``_fusion`` progress.

A fusion stream opens at once (the panel takes seconds; the one exception to holding headers until
the first content): one progress event per settled member, a ``judge`` event at the judge's first
token, then the answer as ordinary content, one usage record summed over every call, and the
surface's terminator. Its ``X-Routed-Via`` names the planned members only (``fusion(a+b)``); a
non-stream reply names the members that answered and the judge (``fusion(a+b -> j)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from aiohttp import web

from freellm.core.chunks import Chunk, make_chunk, make_usage_chunk
from freellm.core.request import ChatRequest
from freellm.engine.context import Attempt, CollectSink, TurnOutcome
from freellm.errors import ClientError, Exhausted
from freellm.fusion.decide import Answer, Verdict, fallback_answer
from freellm.fusion.options import FUSION_MODEL, fusion_options, is_fusion_model
from freellm.fusion.run import CallRecord, FusionRun, MemberResult
from freellm.server.sinks import STREAM_HEADERS, StreamRenderer, to_client
from freellm.server.state import BASE_HEADERS, GATEWAY, Gateway
from freellm.server.turn_http import log_turn, new_context

__all__ = ["FusionRenderer", "fusion_requested", "new_fusion_id", "respond_fusion"]

CompletionRenderer = Callable[[TurnOutcome], dict[str, Any]]
OnComplete = Callable[[TurnOutcome], Awaitable[None]]


class FusionRenderer(StreamRenderer, Protocol):
    """A surface's stream renderer that can also open a stream at once and show fusion progress."""

    def opening(self) -> bytes: ...

    def progress(self, event: dict[str, Any]) -> bytes: ...


def fusion_requested(request: web.Request, requested_model: str) -> bool:
    """``model: "fusion"`` while the feature is on (off: it is an unknown model like any other)."""
    return is_fusion_model(requested_model) and request.app[GATEWAY].settings.fusion.enabled


def new_fusion_id() -> str:
    return f"fusion-{int(time.time() * 1000)}-{secrets.token_hex(4)}"


async def respond_fusion(
    request: web.Request,
    req: ChatRequest,
    *,
    surface: str,
    raw_options: object,
    options_param: str,
    renderer: FusionRenderer,
    render_completion: CompletionRenderer,
    fusion_id: str,
    created: int,
    headers: dict[str, str] | None = None,
    on_complete: OnComplete | None = None,
    output_limit_asked: bool | None = None,
) -> web.StreamResponse:
    """``raw_options``: the request's fusion object as sent (None, an object or a JSON string) at
    ``options_param``. ``fusion_id``/``created``: what the renderers already put in their frames."""
    gw = request.app[GATEWAY]
    ctx = new_context(request, surface, compressible=True)
    ctx.output_limit_asked = output_limit_asked
    edge_headers: dict[str, str] = request[BASE_HEADERS]
    status = 200
    error: BaseException | None = None
    final: TurnOutcome | None = None
    summary: dict[str, Any] = {}
    task = asyncio.current_task()
    if task is not None:
        gw.turns.add(task)
    reply = _Reply(gw, request, renderer, fusion_id, created)
    metrics = gw.metrics
    if metrics is not None:
        metrics.inflight_inc()
    try:
        options = fusion_options(raw_options, gw.settings.fusion, param=options_param)
        try:
            prepared = await gw.engine.fusion_request(ctx, req)
        finally:
            edge_headers.update(ctx.pipeline_headers())
        run = FusionRun(gw.engine, options, ctx, prepared, on_call=lambda call: _log_call(gw, call))
        plan = await run.plan_panel()
        base_headers = {**edge_headers, **(headers or {})}
        if req.stream:
            members = "+".join(r.label for r in plan.members)
            await reply.open({**base_headers, "X-Routed-Via": f"fusion({members})"})
            final = await reply.stream(run, plan)
            if on_complete is not None and final.committed_error is None:
                await on_complete(final)
            return reply.response_or_raise()
        final, summary = await _collect(run, plan, fusion_id, created)
        body = render_completion(final)
        body["model"] = FUSION_MODEL
        body["_fusion"] = summary
        if on_complete is not None:
            await on_complete(final)
        routed = {"X-Routed-Via": _routed_via(summary)}
        return web.Response(body=orjson.dumps(body), content_type="application/json", headers={**base_headers, **routed})
    except (ClientError, Exhausted) as exc:
        status, error = exc.status, exc
        if reply.response is not None:  # no answer after the stream opened: in-band, never a cut
            await reply.fail(FUSION_MODEL, exc.message)
            return reply.response
        raise
    except asyncio.CancelledError as exc:
        if not gw.claim_interrupt(task):
            status, error = 499, exc
            raise
        refusal = ClientError(
            503, "The gateway is shutting down; retry the request.", type="service_unavailable", code="shutting_down"
        )
        status, error = refusal.status, refusal
        if reply.response is not None:
            with contextlib.suppress(Exception):
                await reply.fail("freellm", refusal.message)
            return reply.response
        raise refusal from None
    finally:
        if task is not None:
            gw.turns.discard(task)
        summary = summary or reply.summary
        route = _routed_via(summary) if summary else "fusion"
        try:
            await log_turn(
                gw, ctx, req, status, final, error, route=route, extra={"fusion": summary} if summary else None
            )
        finally:
            if metrics is not None:
                metrics.inflight_dec()


# ---- non-stream ---------------------------------------------------------------------------------------


async def _collect(run: FusionRun, plan: Any, fusion_id: str, created: int) -> tuple[TurnOutcome, dict[str, Any]]:
    results = await run.run_panel(plan, _ignore)
    verdict, survivors = run.verdict(results)
    if verdict.kind == "fail":
        raise _no_survivor(verdict, results)
    judge: TurnOutcome | None = None
    if verdict.kind == "judge":
        try:
            judge = await run.run_judge(run.judge_request(survivors, stream=False), CollectSink())
        except (Exhausted, ClientError):
            judge = None  # never an error: a panel answer instead
    if judge is not None:
        return _final(run, judge, fusion_id, created), _summary(run, results, verdict, judge=judge)
    index = _fallback_index(run, verdict, survivors)
    chosen = survivors[index].outcome
    assert chosen is not None
    return _final(run, chosen, fusion_id, created), _summary(run, results, verdict, judge=None, chosen=survivors[index])


def _final(run: FusionRun, base: TurnOutcome, fusion_id: str, created: int) -> TurnOutcome:
    """The reply's turn: the chosen answer, under the fusion id, with usage summed over every call."""
    usage = run.usage()
    result = dataclasses.replace(base.result, usage=usage, chunk_id=fusion_id, created=created)
    return dataclasses.replace(
        base, result=result, tokens_in=usage["prompt_tokens"], tokens_out=usage["completion_tokens"], trail=[]
    )


def _fallback_index(run: FusionRun, verdict: Verdict, survivors: list[MemberResult]) -> int:
    """The survivor to answer with when there is no judge's answer: the verdict's, or — when the judge
    failed — the longest (valid JSON with ``response_format``); none such is a 502."""
    if verdict.index is not None:
        return verdict.index
    index = fallback_answer(
        [Answer(s.text) for s in survivors], json_required=run.req.response_format is not None
    )
    if index is None:
        raise Exhausted(
            502,
            "provider_error",
            "fusion_invalid_output",
            "Fusion: the judge failed and no panel answer is valid JSON for the requested response_format.",
        )
    return index


# ---- stream ----------------------------------------------------------------------------------------------


class _Reply:
    """The open fusion stream: the one place that writes to the client."""

    def __init__(
        self, gw: Gateway, request: web.Request, renderer: FusionRenderer, fusion_id: str, created: int
    ) -> None:
        self._gw = gw
        self._request = request
        self.renderer = renderer
        self._id = fusion_id
        self._created = created
        self.response: web.StreamResponse | None = None
        self.summary: dict[str, Any] = {}
        """The ``_fusion`` summary once the panel settled (for the request log)."""

    async def open(self, headers: dict[str, str]) -> None:
        response = web.StreamResponse(
            status=200, headers={**headers, "Content-Type": self.renderer.content_type, **STREAM_HEADERS}
        )
        await to_client(response.prepare(self._request))
        self.response = response
        await self.write(self.renderer.opening())

    async def write(self, data: bytes) -> None:
        if data and self.response is not None:
            await to_client(self.response.write(data))

    async def fail(self, provider: str, message: str) -> None:
        await self.write(self.renderer.stream_error(provider, message))

    def response_or_raise(self) -> web.StreamResponse:
        assert self.response is not None
        return self.response

    async def stream(self, run: FusionRun, plan: Any) -> TurnOutcome:
        """Progress, then the answer. No survivor (or no usable answer) raises the exhaustion, which
        the handler writes in-band."""
        expose = run.options.expose_panel

        async def settled(member: MemberResult) -> None:
            await self.write(self.renderer.progress(_panel_event(member, expose=expose)))

        results = await run.run_panel(plan, settled)
        verdict, survivors = run.verdict(results)
        self.summary = _summary(run, results, verdict, judge=None)
        if verdict.kind == "fail":
            raise _no_survivor(verdict, results)
        if verdict.kind == "judge":
            sink = _JudgeSink(self)
            try:
                judge = await run.run_judge(run.judge_request(survivors, stream=True), sink)
            except (Exhausted, ClientError):
                judge = None  # never an error: a panel answer instead
            if judge is not None:
                self.summary = _summary(run, results, verdict, judge=judge)
                if judge.committed_error is None:
                    await self._finish(run)
                return _final(run, judge, self._id, self._created)
        index = _fallback_index(run, verdict, survivors)
        chosen = survivors[index]
        assert chosen.outcome is not None
        self.summary = _summary(run, results, verdict, judge=None, chosen=chosen)
        await self.write(self.renderer.chunks(self._answer_chunks(chosen.outcome)))
        await self._finish(run)
        return _final(run, chosen.outcome, self._id, self._created)

    def _answer_chunks(self, outcome: TurnOutcome) -> list[Chunk]:
        """A panel answer, whole: the role, its text or its tool calls, the finish."""
        result = outcome.result
        cid, created = self._id, self._created
        chunks = [make_chunk(cid, created, FUSION_MODEL, {"role": "assistant", "content": ""})]
        if result.tool_calls:
            calls = [c.as_delta(i) for i, c in enumerate(result.tool_calls)]
            chunks.append(make_chunk(cid, created, FUSION_MODEL, {"tool_calls": calls}))
        elif result.text:
            chunks.append(make_chunk(cid, created, FUSION_MODEL, {"content": result.text}))
        chunks.append(make_chunk(cid, created, FUSION_MODEL, {}, "tool_calls" if result.tool_calls else result.finish_reason))
        return chunks

    async def _finish(self, run: FusionRun) -> None:
        """The usage summed over every call, then the surface's terminator."""
        usage = make_usage_chunk(self._id, self._created, FUSION_MODEL, run.usage())
        await self.write(self.renderer.chunks([usage]) + self.renderer.done())


class _JudgeSink:
    """The judge's sink on the already-open stream. ``committed`` turns true at the judge's first
    payload (so a judge failing before it still fails over, then falls back to a panel answer); the
    judge's own usage record is held back for the summed one."""

    streaming = True

    def __init__(self, reply: _Reply) -> None:
        self._reply = reply
        self.committed = False

    async def send(self, attempt: Attempt, chunks: list[Chunk]) -> None:
        reply = self._reply
        if not self.committed:
            self.committed = True
            event = {"event": "judge", "provider": attempt.route.provider, "model": attempt.route.model}
            await reply.write(reply.renderer.progress(event))
        kept: list[Chunk] = []
        for chunk in chunks:
            if "usage" in chunk:
                if not chunk.get("choices"):
                    continue
                chunk = {k: v for k, v in chunk.items() if k != "usage"}
            kept.append(chunk)
        if kept:
            await reply.write(reply.renderer.chunks(kept))

    async def fail(self, attempt: Attempt, message: str) -> None:
        await self._reply.fail(attempt.route.provider, message)

    async def end(self, outcome: TurnOutcome) -> None:
        return None  # the summed usage and the terminator follow once the judge's tokens are booked


# ---- shared ---------------------------------------------------------------------------------------------


async def _ignore(member: MemberResult) -> None:
    return None


def _panel_event(member: MemberResult, *, expose: bool) -> dict[str, Any]:
    event: dict[str, Any] = {"event": "panel", **_member_entry(member)}
    if expose:
        event.update(_member_detail(member))
    return event


def _member_entry(member: MemberResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"provider": member.provider, "model": member.model, "status": member.status}
    if member.status == "dropped" and member.error:
        entry["reason"] = member.error
    return entry


def _member_detail(member: MemberResult) -> dict[str, Any]:
    outcome = member.outcome
    if outcome is None:
        return {"error": member.error or "failed"}
    calls = outcome.result.tool_calls
    if calls:
        return {"tool_calls": [c.as_delta(i) for i, c in enumerate(calls)]}
    return {"content": outcome.result.text}


def _summary(
    run: FusionRun,
    results: list[MemberResult],
    verdict: Verdict,
    *,
    judge: TurnOutcome | None,
    chosen: MemberResult | None = None,
) -> dict[str, Any]:
    """The ``_fusion`` object of a non-stream reply (and the request-log row's ``fusion``)."""
    route = judge.attempt.route if judge is not None else None
    winner = chosen if verdict.kind == "tool_call" else None
    summary: dict[str, Any] = {
        "panel": [_member_entry(r) for r in results],
        "judge": {"provider": route.provider, "model": route.model} if route is not None else None,
        "synthesized": judge is not None,
        "tool_call_winner": {"provider": winner.provider, "model": winner.model} if winner is not None else None,
        "strategy": run.options.strategy,
    }
    if run.options.expose_panel:
        summary["members"] = [{**_member_entry(r), **_member_detail(r)} for r in results]
    return summary


def _routed_via(summary: dict[str, Any]) -> str:
    members = "+".join(
        f"{m['provider']}/{m['model']}" for m in summary.get("panel", []) if m.get("status") == "ok"
    )
    judge = summary.get("judge")
    return f"fusion({members} -> {judge['provider']}/{judge['model']})" if judge else f"fusion({members})"


def _no_survivor(verdict: Verdict, results: list[MemberResult]) -> Exhausted:
    failed = "; ".join(f"{r.label}: {r.error or r.status}" for r in results if r.status != "ok")
    if verdict.status == 429:
        return Exhausted(
            429,
            "rate_limit_error",
            "rate_limit_exceeded",
            f"Fusion: every panel member is rate-limited ({failed}).",
            retry_at_ms=verdict.retry_at_ms,
        )
    return Exhausted(502, "provider_error", "upstream_failed", f"Fusion: every panel member failed ({failed}).")


async def _log_call(gw: Gateway, call: CallRecord) -> None:
    """One row per panel member and judge call, tagged with the role it played."""
    error = call.error
    if isinstance(error, asyncio.CancelledError):
        status = 499
    elif isinstance(error, ClientError | Exhausted):
        status = error.status
    else:
        status = 200
    await log_turn(gw, call.ctx, call.req, status, call.outcome, error, extra={"fusion_role": call.role})

