"""Time-to-first-byte probe: one connection, one request at a time, optionally at a fixed low rate.

wrk measures whole responses only. This probe measures, for each streamed request, the time from
sending the request to the first body byte (the first SSE frame), and the time to the end of the stream.
The benchmark runs it alone at concurrency 1, and alongside wrk at a low rate (``--rate``) to see the
TTFB that a client gets while the target is under load. Prints one JSON object on stdout. A body
containing ``bench.stats.VARY`` gets a unique string in its place in every request (the cache-miss row).

    python -m bench.ttfb_probe --url http://127.0.0.1:3001/v1/chat/completions \
        --body '{"model": "m", "stream": true, "messages": [...]}' --header 'Authorization: Bearer k' \
        --duration 5 [--rate 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp

from bench.stats import body_source, ms, new_event_loop, percentile


async def probe(
    url: str, body: bytes, headers: dict[str, str], duration: float, rate: float, max_requests: int
) -> dict[str, object]:
    ttfb: list[float] = []
    total: list[float] = []
    frames: list[int] = []
    errors = 0
    last_error = ""
    connector = aiohttp.TCPConnector(limit=1)
    timeout = aiohttp.ClientTimeout(total=60)
    next_body = body_source(body)  # the same body every time, or a unique one (stats.VARY)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one() -> tuple[float, float, int] | None:
            nonlocal errors, last_error
            t0 = time.perf_counter()
            try:
                async with session.post(url, data=next_body(), headers=headers) as resp:
                    first = await resp.content.readany()  # b"" only at the end of the body
                    t1 = time.perf_counter()
                    rest = await resp.read() if first else b""
                    t2 = time.perf_counter()
                    if resp.status != 200 or not first:
                        errors += 1
                        last_error = f"HTTP {resp.status}"
                        return None
                    data = first + rest
                    return t1 - t0, t2 - t0, data.count(b"data:")
            except (TimeoutError, aiohttp.ClientError) as exc:
                errors += 1
                last_error = f"{type(exc).__name__}: {exc}"
                return None

        await one()  # open the connection first; not counted
        start = time.perf_counter()
        deadline = start + duration
        interval = 1.0 / rate if rate > 0 else 0.0
        n = 0
        while time.perf_counter() < deadline and (max_requests <= 0 or n < max_requests):
            if interval:
                slot = start + n * interval
                delay = slot - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if time.perf_counter() >= deadline:
                    break
            n += 1
            got = await one()
            if got is not None:
                ttfb.append(got[0])
                total.append(got[1])
                frames.append(got[2])
    return {
        "requests": len(ttfb),
        "errors": errors,
        "last_error": last_error,
        "ttfb_p50_ms": ms(percentile(ttfb, 50)),
        "ttfb_p99_ms": ms(percentile(ttfb, 99)),
        "total_p50_ms": ms(percentile(total, 50)),
        "total_p99_ms": ms(percentile(total, 99)),
        "frames_p50": percentile(frames, 50),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="TTFB probe (one connection, sequential requests)")
    parser.add_argument("--url", required=True)
    parser.add_argument("--body", required=True, help="JSON request body")
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=0.0, help="requests/s; 0 = back to back")
    parser.add_argument("--max-requests", type=int, default=0)
    args = parser.parse_args()
    headers = {"Content-Type": "application/json"}
    for h in args.header:
        name, _, value = h.partition(":")
        headers[name.strip()] = value.strip()
    loop = new_event_loop()
    try:
        result = loop.run_until_complete(
            probe(args.url, args.body.encode(), headers, args.duration, args.rate, args.max_requests)
        )
    finally:
        loop.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
