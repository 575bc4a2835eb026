"""The async driver of one attempt: open the upstream, feed the pump, hand its output to the sink.

This is the only place where the pump meets I/O. A failure before the sink committed propagates (the
fallback loop retries elsewhere, invisibly); a failure after commit is reported in-band, once, and the
attempt ends as committed — unless ``stream.continue_on_failure`` lets another route continue the
answer (:mod:`freellm.engine.continuation`): then :class:`StreamDied` goes to the loop instead.
"""

from __future__ import annotations

import asyncio

from freellm.config import Settings
from freellm.core.chunks import Chunk
from freellm.core.request import ChatRequest
from freellm.core.tokens import estimate_text_tokens
from freellm.engine.context import Attempt, Sink, TurnOutcome
from freellm.engine.continuation import (
    ContinuationFilter,
    Resume,
    StreamDied,
    can_continue,
    continuation_request,
    spliced,
    summed_usage,
)
from freellm.engine.pump import StreamPump
from freellm.engine.redact import redact
from freellm.engine.tools.hooks import pump_hooks
from freellm.errors import UpstreamError
from freellm.providers.base import Timeouts, UpstreamStream

__all__ = ["HedgeExpired", "drive_attempt"]


class HedgeExpired(Exception):
    """The loop's wall-clock budget ran out while an uncommitted attempt was still waiting."""


class _NoHedge:
    """Stands in for ``asyncio.Timeout`` when the attempt has no wall-clock deadline."""

    async def __aenter__(self) -> _NoHedge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def reschedule(self, when: float | None) -> None:
        return None

    def expired(self) -> bool:
        return False


_NO_HEDGE = _NoHedge()


def attempt_timeouts(settings: Settings, attempt: Attempt) -> Timeouts:
    stream = settings.stream
    first_byte = stream.first_byte_timeout_s or attempt.provider.config.timeout_s
    return Timeouts(connect=stream.connect_timeout_s, first_byte=first_byte, stall=stream.stall_timeout_s)


async def drive_attempt(
    attempt: Attempt, req: ChatRequest, sink: Sink, settings: Settings
) -> TurnOutcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    resume = attempt.resume
    splice: ContinuationFilter | None = None
    if resume is None:
        hooks = pump_hooks(req, settings.tools, streaming=sink.streaming)
        pump = StreamPump(
            attempt.route.model,
            wants_tools=req.wants_tools,
            hold_limit=settings.stream.dialect_hold_chars,
            rescue=hooks.rescue,
            repair=hooks.repair,
            validate=hooks.validate,
            check_text=hooks.check_text,
            tool_names=hooks.tool_names,
            hold_all=hooks.hold_all,
            think_tags=hooks.think_tags,
        )
        deadline = attempt.deadline
    else:  # continuing a committed stream: more of the same answer, no holding, no hedge
        req = continuation_request(req, resume.text)
        splice = ContinuationFilter(resume)
        pump = StreamPump(resume.model, think_tags=False)
        pump.resume()
        deadline = None
    ttfb_ms: int | None = None
    body = req.upstream_body(attempt.route.model, stream=sink.streaming)
    # Attempts 0 and 1 have no hedge: skip the timer (and its task lookup) on the common path.
    hedge: asyncio.Timeout | _NoHedge = asyncio.timeout_at(deadline) if deadline is not None else _NO_HEDGE
    upstream = None
    batch: list[Chunk] = []
    try:
        async with hedge:
            upstream = await attempt.provider.open(
                body, attempt.key, stream=sink.streaming, timeouts=attempt_timeouts(settings, attempt)
            )
            whole = upstream.whole()
            if whole is not None:  # a non-stream answer: one batch, no iteration
                for chunk in whole:
                    batch += pump.feed(chunk if splice is None else splice.chunk(chunk))
                if pump.first_token:
                    ttfb_ms = int((loop.time() - started) * 1000)
            else:
                async for chunk in upstream:
                    out = pump.feed(chunk if splice is None else splice.chunk(chunk))
                    if ttfb_ms is None and pump.first_token:
                        ttfb_ms = int((loop.time() - started) * 1000)
                    if out:
                        batch += out
                    # Everything one upstream read decoded goes out in one client write.
                    if batch and not upstream.buffered:
                        if not sink.committed:
                            hedge.reschedule(None)
                        await sink.send(attempt, batch)
                        batch = []
            if splice is not None:
                rest = splice.rest(pump.model)
                if rest is not None:
                    batch += pump.feed(rest)
            if batch:
                hedge.reschedule(None)
                await sink.send(attempt, batch)
                batch = []
            out = pump.finish(
                saw_done=upstream.saw_done,
                include_usage=req.include_usage,
                usage_estimate=estimate_text_tokens(pump.output_chars),
            )
            hedge.reschedule(None)
            if resume is not None:
                spliced(out, resume, attempt.route.label)
            await sink.send(attempt, out)
            outcome = _outcome(attempt, pump, ttfb_ms, upstream)
            if resume is not None:
                _continued(outcome, resume)
            await sink.end(outcome)
    except TimeoutError as exc:
        if hedge.expired() and not sink.committed:
            raise HedgeExpired() from exc
        raise
    except UpstreamError as err:
        if batch:
            # Chunks decoded before the failure in the same read: the client gets them exactly as it
            # would have chunk by chunk, so batching never changes what is committed.
            await sink.send(attempt, batch)
        # A continuation attempt that sent nothing yet fails over like any uncommitted attempt.
        if not sink.committed or (resume is not None and not pump.sent_text):
            raise
        message, failure = redact(err.message, (attempt.key,)), err  # `err` is unbound after the except

        async def give_up() -> TurnOutcome:
            await sink.fail(attempt, message)
            return _outcome(attempt, pump, ttfb_ms, upstream, committed_error=failure)

        if settings.stream.continue_on_failure and sink.streaming and can_continue(err) and pump.can_resume:
            raise StreamDied(err, _resume_of(attempt, req, pump, ttfb_ms, resume), give_up) from err
        return await give_up()
    finally:
        if upstream is not None:
            # Not contextlib.suppress: two calls fewer on every request. Closing what already failed
            # must not hide the failure.
            try:  # noqa: SIM105
                await upstream.aclose()
            except Exception:
                pass
    return outcome


def _resume_of(
    attempt: Attempt, req: ChatRequest, pump: StreamPump, ttfb_ms: int | None, previous: Resume | None
) -> Resume:
    """What a continuation of this attempt's answer must know: the text so far (every attempt's), the
    stream's identity, and the usage so far (what the upstream reported, else estimated)."""
    usage = pump.usage or {}
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    prompt_tokens = prompt if isinstance(prompt, int) else req.text_token_estimate
    completion_tokens = completion if isinstance(completion, int) else estimate_text_tokens(pump.output_chars)
    if previous is not None:
        return Resume(
            text=previous.text + pump.sent_text,
            chunk_id=previous.chunk_id,
            created=previous.created,
            model=previous.model,
            origin=previous.origin,
            prompt_tokens=previous.prompt_tokens + prompt_tokens,
            completion_tokens=previous.completion_tokens + completion_tokens,
            ttfb_ms=previous.ttfb_ms,
        )
    chunk_id, created = pump.identity
    return Resume(
        text=pump.sent_text,
        chunk_id=chunk_id,
        created=created,
        model=pump.model,
        origin=attempt.route.label,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        ttfb_ms=ttfb_ms,
    )


def _continued(outcome: TurnOutcome, resume: Resume) -> None:
    """A continued turn is one turn: the whole text, the summed usage, the first byte's time."""
    outcome.result.text = resume.text + outcome.result.text
    outcome.tokens_in += resume.prompt_tokens
    outcome.tokens_out += resume.completion_tokens
    outcome.ttfb_ms = resume.ttfb_ms
    outcome.continued_from = resume.origin
    if outcome.result.usage is not None:
        outcome.result.usage = summed_usage(outcome.result.usage, resume)


def _outcome(
    attempt: Attempt,
    pump: StreamPump,
    ttfb_ms: int | None,
    upstream: UpstreamStream | None,
    committed_error: UpstreamError | None = None,
) -> TurnOutcome:
    result = pump.result()
    usage = result.usage or {}
    tokens_out = usage.get("completion_tokens")
    if not isinstance(tokens_out, int):
        tokens_out = estimate_text_tokens(pump.output_chars)
    tokens_in = usage.get("prompt_tokens")
    return TurnOutcome(
        attempt=attempt,
        result=result,
        ttfb_ms=ttfb_ms,
        trail=attempt.trail,
        committed_error=committed_error,
        tokens_in=tokens_in if isinstance(tokens_in, int) else 0,
        tokens_out=tokens_out,
        upstream_headers=upstream.headers if upstream is not None else None,
    )
