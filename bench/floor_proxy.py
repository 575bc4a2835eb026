"""The floor: a bare aiohttp pass-through proxy with no features at all.

``POST /v1/chat/completions`` is forwarded byte for byte to ``<upstream>/chat/completions`` through one
pooled ``aiohttp.ClientSession``; a streamed answer is relayed chunk by chunk as it arrives. No parsing,
no routing, no auth, no logging: the least a Python gateway on aiohttp can cost, so the benchmark can say
how close freellm stays to it.

    python bench/floor_proxy.py --port 9300 --upstream http://127.0.0.1:9101/bench/v1
"""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

SESSION = web.AppKey("session", aiohttp.ClientSession)
FORWARDED = ("Authorization", "Content-Type", "Accept")


def make_app(upstream: str) -> web.Application:
    target = upstream.rstrip("/") + "/chat/completions"

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)
        yield
        await app[SESSION].close()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {h: request.headers[h] for h in FORWARDED if h in request.headers}
        async with request.app[SESSION].post(target, data=body, headers=headers) as up:
            ctype = up.headers.get("Content-Type", "application/json")
            if not ctype.startswith("text/event-stream"):
                return web.Response(body=await up.read(), status=up.status, headers={"Content-Type": ctype})
            resp = web.StreamResponse(
                status=up.status, headers={"Content-Type": ctype, "Cache-Control": "no-cache"}
            )
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/health", health)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="OpenAI-style base URL, e.g. http://host:port/x/v1")
    args = parser.parse_args()
    loop = None
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        pass
    web.run_app(  # backlog as freellm's server.listen_backlog, for the slow-streams mode's connection ramp
        make_app(args.upstream),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
        loop=loop,
        backlog=1024,
    )


if __name__ == "__main__":
    main()
