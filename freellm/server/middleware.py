"""Edge guards that run before any surface: request id, per-IP limiter, body limit, client auth (with
the failed-authentication limiter), error rendering. docs/security.md lists what each one defends."""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from freellm.errors import ClientError, Exhausted
from freellm.server.auth import ClientKeys, extract_admin_key, extract_api_key, key_matches
from freellm.server.errors import ErrorBody, error_response, error_style_for
from freellm.server.protocol_log import describe_protocol_error
from freellm.server.state import BASE_HEADERS, CLIENT, GATEWAY, REQUEST_ID
from freellm.surfaces.gemini_wire.clients import GEMINI_PREFIXES, is_gemini_client, query_key_allowed
from freellm.surfaces.ollama.access import OLLAMA_PREFIX
from freellm.surfaces.ollama.access import check_access as ollama_access

__all__ = ["REQUEST_ID_MAX", "IPRateLimiter", "edge_middleware", "guard_expect_continue", "request_id_of"]

log = logging.getLogger("freellm.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_PUBLIC_PATHS = frozenset({"/health", "/", "/metrics", "/ui", "/mcp"})
"""No client key needed (``/metrics`` checks ``auth.metrics_key`` itself when one is set; ``/mcp`` takes
a client or an admin key and checks it itself, :mod:`freellm.mcp.http`)."""
_PUBLIC_PREFIX = "/ui/"
"""The dashboard's static files (freellm.admin.ui): no client key; the page itself calls the admin API."""


class IPRateLimiter:
    """Fixed 60 s window per client IP (the reference's edge limiter). ``limit <= 0`` turns it off."""

    def __init__(self, limit: int, window_s: float = 60.0) -> None:
        self.limit = limit
        self.window_s = window_s
        self._window_start = 0.0
        self._counts: dict[str, int] = {}

    def hit(self, ip: str, now: float) -> tuple[bool, int, int]:
        """Count one request: (allowed, remaining, reset epoch seconds)."""
        if now - self._window_start >= self.window_s:
            self._window_start = now - (now % self.window_s)
            self._counts.clear()
        count = self._counts.get(ip, 0) + 1
        self._counts[ip] = count
        reset = int(self._window_start + self.window_s)
        return count <= self.limit, max(0, self.limit - count), reset


def _query_key(request: web.Request) -> str | None:
    """Gemini clients may send the key as ``?key=`` (Google's convention); accepted on the Gemini paths
    only, with a one-time warning per app (a key in a URL ends up in proxy and access logs)."""
    key = request.query.get("key")
    if not key or not query_key_allowed(request.path):
        return None
    gw = request.app[GATEWAY]
    if not gw.query_key_warned:
        gw.query_key_warned = True
        log.warning("a client sent its API key in the URL (?key=); prefer the x-goog-api-key header")
    return key


def _error_style(request: web.Request) -> ErrorBody:
    """The surface's error envelope for this path; ``GET /v1/models`` (shared by the OpenAI and Gemini
    surfaces) answers a Gemini client in Gemini's."""
    path = request.path
    if path == "/v1/models" and is_gemini_client(request):
        path = GEMINI_PREFIXES[0]
    return error_style_for(request.app, path)


ADMIN_PREFIX = "/admin/"


def _check_admin(request: web.Request, admin_keys: list[bytes], client_keys: ClientKeys) -> None:
    """``/admin/...`` takes only an admin key (never a client key); with none configured the routes do
    not exist — 404 whatever key is sent, so a scan learns nothing."""
    if not admin_keys:
        raise ClientError(404, "Not found.", code="not_found")
    key = extract_admin_key(request)
    if key is None or not key_matches(key, admin_keys) or client_keys.match(key) is not None:
        raise ClientError(401, "Invalid admin key", type="authentication_error", code="invalid_admin_key")


REQUEST_ID_MAX = 128
"""Longest client ``X-Request-ID`` echoed back."""


def request_id_of(given: str | None) -> str:
    """The client's ``X-Request-ID`` when it is 1-128 visible ASCII characters (0x21-0x7E), else a fresh
    one. Space is refused too: request ids go into space-separated log lines, where one could forge a
    field, and header parsers strip it at the ends, so an echo would not be byte-identical anyway. CR,
    LF and every other control or non-ASCII character are refused, so nothing a client sends here is
    ever reflected into a header it was not (docs/security.md)."""
    if (
        given
        and len(given) <= REQUEST_ID_MAX
        and given.isascii()
        and given.isprintable()
        and " " not in given
    ):
        return given
    return secrets.token_hex(16)


def _auth_refusal(request: web.Request, exc: ClientError) -> ClientError:
    """A failed authentication (any 401) counted by the app's failed-auth limiter: past
    ``server.auth_failure_limit_per_min`` from this address in the window, a 429 with ``Retry-After``
    instead; the first one over the limit is logged (one line per address per window)."""
    limiter = request.app[GATEWAY].auth_limiter
    ip = request.remote or "?"
    verdict = limiter.failed(ip, time.time())
    if not verdict.limited:
        return exc
    if verdict.first_over:
        log.warning(
            "more than %d failed authentications from %s within %gs; answering 429 for the rest of the window",
            limiter.limit,
            ip,
            limiter.window_s,
        )
    return ClientError(
        429,
        "Too many failed authentications from this address; retry later.",
        type="rate_limit_error",
        code="too_many_auth_failures",
        headers={"Retry-After": str(verdict.retry_after_s)},
    )


def _too_large(gw_limit_mb: float) -> ClientError:
    return ClientError(413, f"Request body too large (limit {gw_limit_mb:g} MB).", code="request_too_large")


ExpectHandler = Callable[[web.Request], Awaitable[web.StreamResponse | None]]


def guard_expect_continue(app: web.Application) -> None:
    """Answer ``Expect: 100-continue`` with the 413 itself when the declared length is over the limit.

    aiohttp runs a route's expect handler *before* any middleware and its default one always sends
    ``100 Continue`` — an invitation to upload a body the edge will refuse (curl asks this way for every
    body over 1 MB). Each route's handler is wrapped once, at start-up; aiohttp has no public setter for
    it, so a route without the attribute (a future aiohttp) keeps its own and the edge's 413 still
    follows, only after the ``100``."""
    for route in app.router.routes():
        inner: ExpectHandler | None = getattr(route, "_expect_handler", None)
        if inner is None:
            continue

        async def guarded(request: web.Request, inner: ExpectHandler = inner) -> web.StreamResponse | None:
            gw = request.app[GATEWAY]
            declared = request.content_length
            if declared is not None and declared > gw.body_limit:
                extra = {"X-Request-ID": request_id_of(request.headers.get("X-Request-ID"))}
                response = error_response(_too_large(gw.settings.server.body_limit_mb), extra, _error_style(request))
                response.force_close()  # the client holds its body back; nothing more will come on this line
                return response
            return await inner(request)

        route._expect_handler = guarded


@web.middleware
async def edge_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request_id_of(request.headers.get("X-Request-ID"))
    request[REQUEST_ID] = request_id
    gw = request.app[GATEWAY]
    extra: dict[str, str] = {"X-Request-ID": request_id}
    request[BASE_HEADERS] = extra
    path = request.path
    try:
        if path.startswith("/v1"):
            limiter = gw.ip_limiter
            if limiter.limit > 0:
                ok, remaining, reset = limiter.hit(request.remote or "?", time.time())
                extra["X-RateLimit-Limit"] = str(limiter.limit)
                extra["X-RateLimit-Remaining"] = str(remaining)
                extra["X-RateLimit-Reset"] = str(reset)
                if not ok:
                    raise ClientError(
                        429,
                        "Too many requests from this address; slow down.",
                        type="rate_limit_error",
                        code="rate_limit_exceeded",
                        headers={"Retry-After": str(max(1, math.ceil(reset - time.time())))},
                    )
        declared = request.content_length
        if declared is not None and declared > gw.body_limit:
            # Refused on the declared length alone, before a byte of the body is read.
            raise _too_large(gw.settings.server.body_limit_mb)
        if path.startswith(ADMIN_PREFIX) or path == ADMIN_PREFIX[:-1]:
            _check_admin(request, gw.admin_keys, gw.client_keys)
        elif path.startswith(OLLAMA_PREFIX):
            ollama_access(request, gw)  # ollama.mode decides: off, loopback (no key) or key
        elif path not in _PUBLIC_PATHS and not path.startswith(_PUBLIC_PREFIX):
            key = extract_api_key(request) or _query_key(request)
            client = gw.client_keys.match(key) if key is not None else None
            if client is None:
                raise ClientError(401, "Invalid API key", type="authentication_error", code="invalid_api_key")
            request[CLIENT] = client
        response = await handler(request)
    except ClientError as exc:
        refusal = _auth_refusal(request, exc) if exc.status == 401 else exc
        response = error_response(refusal, extra, _error_style(request))
    except Exhausted as exc:
        response = error_response(exc, extra, _error_style(request))
    except HttpProcessingError as exc:
        # A body that turned out malformed while a handler read it (broken chunked framing, a length
        # that lies): the client's fault, one log line, never a traceback (freellm.server.protocol_log).
        log.warning(
            "malformed HTTP request from %s on %s %s (request %s): %s",
            request.remote,
            request.method,
            request.raw_path[:200],
            request_id,
            describe_protocol_error(exc),
        )
        response = error_response(
            ClientError(400, "Malformed HTTP request body.", code="malformed_request"), extra, _error_style(request)
        )
    except web.HTTPRequestEntityTooLarge:
        response = error_response(
            ClientError(413, "Request body too large.", code="request_too_large"),
            extra,
            _error_style(request),
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kept = {name: exc.headers[name] for name in ("Allow",) if name in exc.headers}  # a 405 names its methods
        response = error_response(
            ClientError(exc.status, exc.reason, code=None, headers=kept), extra, _error_style(request)
        )
    except Exception:
        log.exception("unhandled error on %s %s (request %s)", request.method, request.raw_path[:200], request_id)
        response = error_response(
            ClientError(500, "Internal gateway error; see the gateway log for this request id.", type="server_error"),
            extra,
            _error_style(request),
        )
    if not response.prepared:
        for name, value in extra.items():
            response.headers.setdefault(name, value)
    return response
