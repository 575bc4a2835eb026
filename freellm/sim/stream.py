"""Transport-level playback shared by every wire: delays, cuts, stalls and disconnect detection.

The wire renders all frames up front; this driver only decides *when* (and whether) each one is written,
so the per-chunk cost of a healthy stream is a tuple unpack, a comparison and ``write``.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from freellm.sim.plan import Frame, FrameKind
from freellm.sim.scenario import Scenario
from freellm.sim.state import Outcome

__all__ = ["cut_connection", "play_frames", "stall"]


def cut_connection(request: web.BaseRequest) -> None:
    """Close the TCP connection under the response: the client sees EOF mid-body (or no response).

    ``close`` (not ``abort``) so frames already written are delivered before the FIN; the chunked body is
    left unterminated, which HTTP clients report as an incomplete payload.
    """
    transport = request.transport
    if transport is not None:
        transport.close()


async def stall(request: web.BaseRequest, closing: asyncio.Event, max_s: float, poll_s: float) -> Outcome:
    """Send nothing until the client leaves, the server shuts down or ``max_s`` passes.

    With handler cancellation on (``start_sim``, ``run_sim_forever``) a disconnect cancels this coroutine
    at once; the ``poll_s`` transport check only serves apps run without it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_s
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            cut_connection(request)
            return Outcome.STALLED
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing.wait(), min(remaining, poll_s))
        if closing.is_set():
            cut_connection(request)
            return Outcome.SERVER_CLOSED
        transport = request.transport
        if transport is None or transport.is_closing():
            return Outcome.CLIENT_DISCONNECTED


async def play_frames(
    request: web.BaseRequest,
    response: web.StreamResponse,
    frames: list[Frame],
    scenario: Scenario,
    closing: asyncio.Event,
    stall_max_s: float,
    poll_s: float,
) -> Outcome | None:
    """Write ``frames`` honouring ``chunk_delay_ms``, ``cut_after`` and ``stall_after``.

    Returns the transport outcome (cut, stalled, ...) or ``None`` when every frame was written; a
    vanished client surfaces as ``ConnectionResetError`` / ``CancelledError`` for the caller to record.
    """
    cut_at = scenario.cut_after
    stall_at = scenario.stall_after
    limits = [x for x in (cut_at, stall_at) if x is not None]
    stop_at = min(limits) if limits else None
    cut_first = cut_at is not None and cut_at == stop_at  # both set: the earlier one wins, cut on a tie
    delay = scenario.chunk_delay_ms / 1000.0
    seen = 0
    started = False
    for data, kind in frames:
        if stop_at is not None and kind >= FrameKind.CONTENT and (kind == FrameKind.POST or seen >= stop_at):
            if cut_first:
                cut_connection(request)
                return Outcome.CUT
            return await stall(request, closing, stall_max_s, poll_s)
        if delay and kind is not FrameKind.NOISE and kind is not FrameKind.POST:
            if started:
                await asyncio.sleep(delay)
            started = True
        await response.write(data)
        if kind == FrameKind.CONTENT:
            seen += 1
    return None
