"""The web dashboard at ``/ui`` (docs/dashboard.md): static HTML, CSS and JavaScript modules, served
from package data by the gateway itself.

The files hold no data: the page asks for an admin key and only then calls the admin API (with it) from
the browser, so nothing about providers or keys is in what this module serves. They are served with a
strict ``Content-Security-Policy`` (everything from this origin only: no inline script or style, no
framing) and no client key is needed to fetch them (the edge middleware lets ``/ui`` through). ``/``
redirects to ``/ui``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Final

from aiohttp import web

from freellm.errors import ClientError
from freellm.server.state import BASE_HEADERS

__all__ = ["CONTENT_SECURITY_POLICY", "UI_PATH", "register"]

UI_PATH: Final = "/ui"

CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}
_NAME: Final = re.compile(r"^[a-z0-9][a-z0-9_-]*\.[a-z0-9]+$")
"""A servable file name: one path segment, no leading dot (so no traversal and no hidden files)."""

_SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    content_type: str


def _load_assets() -> dict[str, _Asset]:
    """Every servable file of this package, read once: ``name → asset``."""
    assets: dict[str, _Asset] = {}
    for entry in resources.files(__package__ or __name__).iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if not entry.is_file() or not _NAME.match(name) or suffix not in _TYPES:
            continue
        assets[name] = _Asset(entry.read_bytes(), _TYPES[suffix])
    return assets


def register(app: web.Application) -> None:
    assets = _load_assets()
    if "index.html" not in assets:  # a broken install: say so at start-up, not as a blank page
        raise RuntimeError("the dashboard's files are missing from the freellm package (freellm/admin/ui)")

    def reply(request: web.Request, asset: _Asset) -> web.Response:
        base: dict[str, str] = request[BASE_HEADERS]  # the edge's request id and rate-limit headers
        return web.Response(
            body=asset.body, headers={**base, **_SECURITY_HEADERS, "Content-Type": asset.content_type}
        )

    async def index(request: web.Request) -> web.Response:
        return reply(request, assets["index.html"])

    async def asset(request: web.Request) -> web.Response:
        found = assets.get(request.match_info["file"])
        if found is None:
            raise ClientError(404, "Not found.", code="not_found")
        return reply(request, found)

    async def root(request: web.Request) -> web.Response:
        base: dict[str, str] = request[BASE_HEADERS]
        return web.Response(status=302, headers={**base, "Location": UI_PATH})

    app.router.add_get("/", root)
    app.router.add_get(UI_PATH, index)
    app.router.add_get(f"{UI_PATH}/", index)
    app.router.add_get(UI_PATH + "/{file}", asset)
