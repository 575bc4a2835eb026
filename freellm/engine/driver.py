"""The async driver of one attempt: open the upstream, feed the pump, hand its output to the sink.

This is the only place where the pump meets I/O. A failure before the sink committed propagates (the
fallback loop retries elsewhere, invisibly); a failure after commit is reported in-band, once, and the
attempt ends as committed.
"""

from __future__ import annotations

import asyncio
import contextlib

from freellm.config import Settings
from freellm.core.chunks import Chunk
from freellm.core.request import ChatRequest
from freellm.core.tokens import estimate_text_tokens
from freellm.engine.context import Attempt, Sink, TurnOutcome
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
    ttfb_ms: int | None = None
    body = req.upstream_body(attempt.route.model, stream=sink.streaming)
    # Attempts 0 and 1 have no hedge: skip the timer (and its task lookup) on the common path.
    hedge: asyncio.Timeout | _NoHedge = (
        asyncio.timeout_at(attempt.deadline) if attempt.deadline is not None else _NO_HEDGE
    )
    upstream = None
    batch: list[Chunk] = []
    try:
        async with hedge:
            upstream = await attempt.provider.open(
                body, attempt.key, stream=sink.streaming, timeouts=attempt_timeouts(settings, attempt)
            )
            async for chunk in upstream:
                out = pump.feed(chunk)
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
            await sink.send(attempt, out)
            outcome = _outcome(attempt, pump, ttfb_ms, upstream)
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
        if not sink.committed:
            raise
        await sink.fail(attempt, redact(err.message, (attempt.key,)))
        return _outcome(attempt, pump, ttfb_ms, upstream, committed_error=err)
    finally:
        if upstream is not None:
            with contextlib.suppress(Exception):
                await upstream.aclose()
    return outcome


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
