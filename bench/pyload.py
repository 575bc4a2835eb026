"""Fallback load generator, used only when wrk is not installed (``--loadgen python`` forces it).

A closed loop like wrk's: ``--concurrency`` connections, each sending the next request as soon as the
previous answer (the whole body, the whole stream) has arrived, for ``--duration`` seconds. It is an
aiohttp client, so it spends far more CPU per request than wrk: on a 2-core machine it saturates its
own core long before a fast server does. Its numbers are labelled ``python-fallback`` in the output and
are NOT comparable with wrk's. Prints one JSON object in the same shape as the wrk script's. A body
containing ``bench.stats.VARY`` gets a unique string in its place in every request, as in the wrk script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp

from bench.stats import body_source, ms, new_event_loop, percentile


async def load(
    url: str, body: bytes, headers: dict[str, str], concurrency: int, duration: float
) -> dict[str, object]:
    latencies: list[float] = []
    errors = {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0}
    nbytes = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=30)
    next_body = body_source(body)  # the same body every time, or a unique one (stats.VARY)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + duration

        async def worker() -> None:
            nonlocal nbytes
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                try:
                    async with session.post(url, data=next_body(), headers=headers) as resp:
                        data = await resp.read()
                        nbytes += len(data)
                        if resp.status >= 400:
                            errors["status"] += 1
                except TimeoutError:
                    errors["timeout"] += 1
                    continue
                except aiohttp.ClientConnectorError:
                    errors["connect"] += 1
                    await asyncio.sleep(0.01)
                    continue
                except aiohttp.ClientError:
                    errors["read"] += 1
                    continue
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return {
        "tool": "python-fallback",
        "requests": len(latencies),
        "duration_s": round(elapsed, 3),
        "bytes": nbytes,
        "errors": errors,
        "p50_ms": ms(percentile(latencies, 50)),
        "p90_ms": ms(percentile(latencies, 90)),
        "p99_ms": ms(percentile(latencies, 99)),
        "max_ms": ms(max(latencies) if latencies else None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="closed-loop HTTP load (fallback when wrk is absent)")
    parser.add_argument("--url", required=True)
    parser.add_argument("--body", required=True)
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args()
    headers = {"Content-Type": "application/json"}
    for h in args.header:
        name, _, value = h.partition(":")
        headers[name.strip()] = value.strip()
    loop = new_event_loop()
    try:
        result = loop.run_until_complete(
            load(args.url, args.body.encode(), headers, args.concurrency, args.duration)
        )
    finally:
        loop.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
