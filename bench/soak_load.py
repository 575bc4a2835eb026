"""The soak's traffic: chat and Responses, streamed and not, with scripted failures and client hang-ups.

Request ``i`` goes to chat completions, except every fourth, which goes to the Responses API (each
stored, so the response store grows as it does in use); even ``i`` stream. The share ``fail_rate`` of
requests carries a marker that makes ``flaky`` fail in one of the :data:`FAILURES` ways (in rotation),
and the share ``hangup_rate`` of the streams is dropped by its client after the first content frame —
those streams are scripted slow (:data:`HANGUP_SCENARIO`) so the hang-up really lands mid-stream and the
gateway must let go of the upstream request it was serving.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp

from bench.targets import CLIENT_KEY

__all__ = ["FAILURES", "HANGUP_MARK", "HANGUP_SCENARIO", "Counters", "LoadMix", "drive"]

FAILURES: Final[dict[str, dict[str, Any]]] = {
    "status500": {"status": 500, "error_message": "soak: scripted failure"},
    "status429": {"status": 429, "retry_after": 1},
    "cut0": {"cut_after": 0},
    "cut5": {"cut_after": 5},
}
HANGUP_MARK: Final = "[soak-hangup]"
HANGUP_SCENARIO: Final[dict[str, Any]] = {"chunks": 20, "chunk_delay_ms": 10}
"""What a stream its client will hang up on gets, on both routes: 200 ms long, so the client's drop
lands in the middle of it."""


@dataclass(frozen=True, slots=True)
class LoadMix:
    concurrency: int
    fail_rate: float
    hangup_rate: float


@dataclass
class Counters:
    requests: int = 0
    ok: int = 0
    failed_over: int = 0
    http_errors: int = 0
    stream_errors: int = 0
    transport_errors: int = 0
    hung_up: int = 0
    marked: int = 0
    by_status: dict[int, int] = field(default_factory=dict)


def _every(rate: float) -> int:
    return round(1 / rate) if rate > 0 else 0


def request_for(i: int, mix: LoadMix) -> tuple[str, bytes, bool, bool]:
    """Path, body, whether it streams and whether its client will hang up, for request ``i``."""
    stream = i % 2 == 0
    responses = i % 4 == 3
    text = f"soak request {i}"
    fail_every, hangup_every = _every(mix.fail_rate), _every(mix.hangup_rate)
    if fail_every and i % fail_every == 0:
        # Consecutive marked requests alternate stream/non-stream (when fail_every is odd), so step the
        # kind every second one: each kind then meets both modes.
        kinds = list(FAILURES)
        text += f" [soak-fail-{kinds[(i // fail_every // 2) % len(kinds)]}]"
    hang_up = bool(stream and hangup_every and (i // 2) % hangup_every == 1 and "[soak-fail-" not in text)
    if hang_up:
        text += f" {HANGUP_MARK}"
    if responses:
        return (
            "/v1/responses",
            json.dumps({"model": "auto", "stream": stream, "input": text}).encode(),
            stream,
            hang_up,
        )
    body = {"model": "auto", "stream": stream, "messages": [{"role": "user", "content": text}]}
    return "/v1/chat/completions", json.dumps(body).encode(), stream, hang_up


def _stream_ok(path: str, data: bytes) -> bool:
    if path == "/v1/responses":
        return b"response.completed" in data and b"response.failed" not in data
    return b'"error"' not in data and data.rstrip().endswith(b"data: [DONE]")


async def drive(base_url: str, mix: LoadMix, counters: Counters, deadline: float) -> None:
    """``mix.concurrency`` clients sending request after request until ``deadline``."""
    headers = {"Authorization": f"Bearer {CLIENT_KEY}", "Content-Type": "application/json"}
    seq = iter(range(1, 1 << 62))
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=mix.concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as s:

        async def worker() -> None:
            while time.monotonic() < deadline:
                path, body, stream, hang_up = request_for(next(seq), mix)
                if b"[soak-fail-" in body:
                    counters.marked += 1
                try:
                    async with s.post(base_url + path, data=body, headers=headers) as resp:
                        if hang_up and resp.status == 200:
                            await resp.content.readline()  # the first frame, then away
                            resp.close()
                            counters.requests += 1
                            counters.hung_up += 1
                            continue
                        data = await resp.read()
                        counters.requests += 1
                        counters.by_status[resp.status] = counters.by_status.get(resp.status, 0) + 1
                        if resp.headers.get("X-Fallback-Attempts"):
                            counters.failed_over += 1
                        if resp.status != 200:
                            counters.http_errors += 1
                        elif stream and not _stream_ok(path, data):
                            counters.stream_errors += 1
                        else:
                            counters.ok += 1
                except (TimeoutError, aiohttp.ClientError):
                    counters.requests += 1
                    counters.transport_errors += 1

        await asyncio.gather(*(worker() for _ in range(mix.concurrency)))
