"""The slow-stream load generator: holds N concurrent streams open and timestamps every content frame.

``bench.slow`` starts one or more of these processes (``--streams`` is this process's share). Each
stream is one keep-alive TCP connection in a closed loop: send the streamed chat request, read the SSE
answer to its chunked terminator, send the next one at once, so N connections keep about N streams
open for the whole run. The connections open at ``--ramp`` per second from ``--start-at`` (a
wall-clock time shared by every generator process), which also staggers the streams so their frames do
not arrive in lockstep.

It is raw asyncio (a ``Protocol`` per connection on uvloop), not an HTTP client library, because at
5,000 streams 40 ms apart the client sees 125,000 frames a second on a core it shares with the
simulator: per read it does two ``bytes.count`` calls and a clock read. A *content frame* is a frame
with a non-empty ``"content":"…"`` (the role frame's ``"content":""`` and the finish, usage and
``[DONE]`` frames are not: the simulator sleeps ``--gap-ms`` only between content frames). The gap of a
content frame is the time since the previous content frame of the same stream arrived; frames that
arrive in the same read have a gap of 0 (the client saw them together). Gaps go into a 0.1 ms
histogram, so percentiles are exact to 0.1 ms without keeping millions of samples.

A stream counts as *open* from its first SSE frame to its end: a connection waiting in the server's
accept queue, or a request the server has not answered yet, is not a stream it holds.

Only what happens inside the measurement window (``--window-start`` .. ``--window-end``, seconds after
``--start-at``) is counted: gaps, TTFB (request written → first SSE frame) of streams sent inside it,
streams completed, errors. Prints one JSON object (``BENCH_JSON {...}``) at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench.stats import new_event_loop

MARK = "BENCH_JSON "
CONTENT = b'"content":"'
EMPTY = b'"content":""'
DATA = b"data:"
DONE = b"[DONE]"
END_CHUNKED = b"\r\n0\r\n\r\n"
BUCKET_S = 0.0001
MAX_BUCKET = 100_000
"""0.1 ms buckets up to 10 s; a longer gap lands in the last one."""


@dataclass
class Stats:
    """What every connection of this process adds to (only inside the window)."""

    window: tuple[float, float]
    gaps: list[int] = field(default_factory=lambda: [0] * (MAX_BUCKET + 1))
    ttfb: list[int] = field(default_factory=lambda: [0] * (MAX_BUCKET + 1))
    frames: int = 0
    completed: int = 0
    started: int = 0
    errors: dict[str, int] = field(
        default_factory=lambda: {"connect": 0, "reset": 0, "status": 0, "incomplete": 0, "timeout": 0, "in_band": 0}
    )
    last_error: str = ""
    open_now: int = 0
    open_min: int | None = None
    open_max: int = 0
    open_samples: list[int] = field(default_factory=list)

    def inside(self, t: float) -> bool:
        return self.window[0] <= t < self.window[1]

    def error(self, kind: str, detail: str, t: float) -> None:
        if self.inside(t):
            self.errors[kind] += 1
            self.last_error = detail[:200]


def _bucket(seconds: float) -> int:
    return min(MAX_BUCKET, int(seconds / BUCKET_S))


class StreamClient(asyncio.Protocol):
    """One keep-alive connection sending one streamed request after another."""

    def __init__(self, request: bytes, stats: Stats, done: asyncio.Future[None], timeout_s: float) -> None:
        self.request = request
        self.stats = stats
        self.done = done
        self.timeout_s = timeout_s
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.stopping = False
        self._reset()

    def _reset(self) -> None:
        self.sent_at = 0.0
        self.head = b""
        self.in_body = False
        self.first_at: float | None = None
        self.last_content: float | None = None
        self.tail_c = b""
        self.tail_e = b""
        self.tail_end = b""
        self.content_seen = 0
        self.empty_seen = 0
        self.saw_done = False
        self.open = False
        self.streaming = False

    # -- asyncio.Protocol --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass
        self._send()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        st = self.stats
        if not self.in_body:
            self.head += data
            sep = self.head.find(b"\r\n\r\n")
            if sep < 0:
                return
            status_line = self.head[: self.head.find(b"\r\n")]
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or parts[1] != b"200":
                st.error("status", status_line.decode(errors="replace"), self.sent_at)
                self._close()
                return
            self.in_body = True
            data = self.head[sep + 4 :]
            self.head = b""
            if not data:
                return
        if self.first_at is None and DATA in data:
            self.first_at = now
            self.streaming = True  # open from the first frame: the server is streaming it, not queueing it
            st.open_now += 1
            if st.inside(self.sent_at):
                st.ttfb[_bucket(now - self.sent_at)] += 1
        buf_c = self.tail_c + data
        buf_e = self.tail_e + data
        content = buf_c.count(CONTENT)
        empty = buf_e.count(EMPTY)
        self.tail_c = buf_c[-(len(CONTENT) - 1) :]
        self.tail_e = buf_e[-(len(EMPTY) - 1) :]
        self.content_seen += content
        self.empty_seen += empty
        n = content - empty
        if n > 0:
            if st.inside(now):
                st.frames += n
                if self.last_content is not None:
                    st.gaps[_bucket(now - self.last_content)] += 1
                    st.gaps[0] += n - 1
                elif n > 1:
                    st.gaps[0] += n - 1
            self.last_content = now
        if not self.saw_done and DONE in data:
            self.saw_done = True
            if b'"error"' in data:
                st.error("in_band", data[:200].decode(errors="replace"), now)
        end = self.tail_end + data
        if end.endswith(END_CHUNKED) or (self.saw_done and end.endswith(b"0\r\n\r\n")):
            self._finished(now)
        else:
            self.tail_end = end[-len(END_CHUNKED) :]

    def connection_lost(self, exc: Exception | None) -> None:
        now = time.perf_counter()
        if self.open:
            streaming = self.streaming
            self._closed_stream()
            if self.saw_done:
                self._count_complete(now)
            elif not streaming:
                # reset before any answer: typically a connection the server's full accept queue dropped
                self.stats.error("reset", f"connection lost before the first frame: {exc}", now)
            else:
                self.stats.error("incomplete", f"connection lost mid-stream: {exc}", now)
        self.transport = None
        if not self.done.done():
            self.done.set_result(None)

    # -- the closed loop --
    def _send(self) -> None:
        if self.stopping or self.transport is None:
            self._close()
            return
        self._reset()
        self.sent_at = time.perf_counter()
        self.open = True
        st = self.stats
        if st.inside(self.sent_at):
            st.started += 1
        self.transport.write(self.request)
        self.deadline = self.loop.call_later(self.timeout_s, self._timed_out, self.sent_at)

    def _timed_out(self, sent_at: float) -> None:
        if self.open and self.sent_at == sent_at:
            self.stats.error(
                "timeout", f"stream not finished after {self.timeout_s:g} s", time.perf_counter()
            )
            self._closed_stream()
            self._close()

    def _closed_stream(self) -> None:
        if self.open:
            self.open = False
            self.deadline.cancel()
            if self.streaming:
                self.streaming = False
                self.stats.open_now -= 1

    def _count_complete(self, now: float) -> None:
        if self.stats.inside(now):
            self.stats.completed += 1

    def _finished(self, now: float) -> None:
        self._closed_stream()
        if not self.saw_done:
            self.stats.error("incomplete", "body ended without [DONE]", now)
        else:
            self._count_complete(now)
        self._send()

    def _close(self) -> None:
        self._closed_stream()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def build_request(url: str, body: bytes, headers: dict[str, str]) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [
        f"POST {parts.path or '/'} HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        "Accept: text/event-stream",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("content-type", "content-length")),
    ]
    return host, port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def percentiles(hist: list[int], pcts: tuple[float, ...]) -> dict[str, float | None]:
    total = sum(hist)
    out: dict[str, float | None] = {}
    for p in pcts:
        if not total:
            out[f"p{p:g}"] = None
            continue
        rank = max(1, int(-(-p / 100.0 * total // 1)))
        seen = 0
        for i, n in enumerate(hist):
            seen += n
            if seen >= rank:
                out[f"p{p:g}"] = round((i + 0.5) * BUCKET_S * 1000.0, 2) if i else 0.0
                break
    return out


async def run(args: argparse.Namespace) -> dict[str, object]:
    host, port, request = build_request(args.url, args.body.encode(), dict(_headers(args.header)))
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter() + (args.start_at - time.time())
    stats = Stats(window=(t0 + args.window_start, t0 + args.window_end))
    clients: list[StreamClient] = []
    done: list[asyncio.Future[None]] = []
    await asyncio.sleep(max(0.0, t0 - time.perf_counter()))

    async def sampler() -> None:
        while True:
            now = time.perf_counter()
            if stats.inside(now):
                stats.open_min = (
                    stats.open_now if stats.open_min is None else min(stats.open_min, stats.open_now)
                )
                stats.open_max = max(stats.open_max, stats.open_now)
                stats.open_samples.append(stats.open_now)
            await asyncio.sleep(0.1)

    sampling = asyncio.ensure_future(sampler())
    interval = 1.0 / args.ramp if args.ramp > 0 else 0.0
    connect_errors = 0

    async def connect() -> None:
        # Not awaited one after another: a connect that waits for a SYN retransmit (a full accept
        # queue) must not hold up the ones scheduled after it.
        nonlocal connect_errors
        fut: asyncio.Future[None] = loop.create_future()
        try:
            _, proto = await loop.create_connection(
                lambda: StreamClient(request, stats, fut, args.stream_timeout), host, port
            )
        except OSError as exc:
            connect_errors += 1
            stats.error("connect", f"{type(exc).__name__}: {exc}", time.perf_counter())
            return
        clients.append(proto)
        done.append(fut)

    connecting = []
    for i in range(args.streams):
        delay = t0 + i * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        connecting.append(asyncio.ensure_future(connect()))
    end = t0 + args.window_end
    await asyncio.sleep(max(0.0, end - time.perf_counter()))
    pending = [c for c in connecting if not c.done()]
    for c in pending:  # still waiting for the handshake (SYN retransmits): never got a stream
        c.cancel()
    if pending:
        stats.errors["connect"] += len(pending)
        stats.last_error = f"{len(pending)} connection(s) not established by the end of the window"
    for c in clients:
        c.stopping = True
    await asyncio.sleep(0)
    for c in clients:
        c._close()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*done), 10)
    sampling.cancel()
    width = args.window_end - args.window_start
    gap = percentiles(stats.gaps, (50, 90, 99, 99.9))
    ttfb = percentiles(stats.ttfb, (50, 99))
    return {
        "streams": args.streams,
        "connected": len(clients),
        "connect_errors": connect_errors,
        "window_s": width,
        "frames": stats.frames,
        "gaps": sum(stats.gaps),
        "gap_hist": _sparse(stats.gaps),
        "ttfb_hist": _sparse(stats.ttfb),
        "gap_p50_ms": gap["p50"],
        "gap_p99_ms": gap["p99"],
        "ttfb_p50_ms": ttfb["p50"],
        "ttfb_p99_ms": ttfb["p99"],
        "started": stats.started,
        "completed": stats.completed,
        "errors": stats.errors,
        "last_error": stats.last_error,
        "open_min": stats.open_min,
        "open_max": stats.open_max,
        "open_median": sorted(stats.open_samples)[len(stats.open_samples) // 2] if stats.open_samples else 0,
    }


def _sparse(hist: list[int]) -> dict[str, int]:
    """The non-empty buckets (index → count), so several processes' histograms can be summed."""
    return {str(i): n for i, n in enumerate(hist) if n}


def _headers(raw: list[str]) -> list[tuple[str, str]]:
    out = []
    for h in raw:
        name, _, value = h.partition(":")
        out.append((name.strip(), value.strip()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="hold N concurrent SSE streams, timestamp content frames")
    parser.add_argument("--url", required=True)
    parser.add_argument("--body", required=True)
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--ramp", type=float, default=1000.0, help="connections opened per second")
    parser.add_argument("--start-at", type=float, required=True, help="wall-clock time (time.time())")
    parser.add_argument("--window-start", type=float, required=True, help="seconds after --start-at")
    parser.add_argument("--window-end", type=float, required=True)
    parser.add_argument("--stream-timeout", type=float, default=120.0)
    args = parser.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = new_event_loop()
    try:
        result = loop.run_until_complete(run(args))
    finally:
        loop.close()
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
