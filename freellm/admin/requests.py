"""``GET /admin/requests``: the request log, newest first, filtered by the store (docs/analytics.md).

Query parameters (each optional): ``limit`` (1 to 1000, default 100), ``status`` (comma-separated HTTP
statuses and classes: ``429``, ``5xx``, ``4xx,200``), ``route`` (exactly a row's route: ``provider/model``,
``cache``, ``fusion(…)``) and ``since`` (epoch seconds: rows that started then or later). A bad value is a
400 naming the parameter. Message bodies appear only when ``logging.bodies`` was on when a row was written.
"""

from __future__ import annotations

import math
from typing import Any, Final

from aiohttp import web

from freellm.errors import ClientError
from freellm.server.state import BASE_HEADERS, GATEWAY
from freellm.store.base import RequestLogRow, StatusFilter

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "parse_status", "register", "row_json"]

DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 1000
_CLASSES: Final = {f"{d}xx": (d * 100, d * 100 + 99) for d in range(1, 6)}


def register(app: web.Application) -> None:
    app.router.add_get("/admin/requests", list_requests)


def _bad(param: str, expected: str) -> ClientError:
    return ClientError(400, f"Invalid request: {param}: {expected}", code="invalid_parameter", param=param)


def parse_status(text: str) -> StatusFilter:
    """``429`` / ``5xx`` / ``4xx,200`` → the ranges they name. Raises ValueError on anything else."""
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        token = part.strip().lower()
        if token in _CLASSES:
            ranges.append(_CLASSES[token])
        elif len(token) == 3 and token.isdigit() and 100 <= int(token) <= 599:
            ranges.append((int(token), int(token)))
        else:
            raise ValueError(token)
    return StatusFilter(tuple(dict.fromkeys(ranges)))


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    raw = raw.strip()
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise _bad("limit", f"Input should be an integer from 1 to {MAX_LIMIT}")
    return int(raw)


def _since(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise _bad("since", "Input should be a time in epoch seconds (a non-negative number)")
    return value


def row_json(row: RequestLogRow) -> dict[str, Any]:
    """One row as the admin API shows it (``request``/``response`` only when bodies were logged)."""
    out: dict[str, Any] = {
        "id": row.request_id,
        "time": row.ts,
        "surface": row.surface,
        "route": row.route,
        "status": row.status,
        "attempts": row.attempts,
        "latency_ms": row.latency_ms,
        "ttft_ms": row.ttfb_ms,
        "tokens_in": row.tokens_in,
        "tokens_out": row.tokens_out,
        "error_class": row.error_class,
        "cached": row.route == "cache",
    }
    for key in ("continued_from", "continued_on"):  # a stream another route finished (docs/continuation.md)
        if key in row.extra:
            out[key] = row.extra[key]
    bodies = row.extra.get("bodies")
    if isinstance(bodies, dict):
        out["request"] = bodies.get("request")
        out["response"] = bodies.get("response")
    return out


async def list_requests(request: web.Request) -> web.Response:
    """``{data: [row, …]}``, newest first."""
    query = request.query
    limit = _limit(query.get("limit"))
    status: StatusFilter | None = None
    raw_status = query.get("status")
    if raw_status is not None:
        try:
            status = parse_status(raw_status)
        except ValueError:
            raise _bad("status", "Input should be HTTP statuses or classes like 429, 5xx or 4xx,200") from None
    route = query.get("route")
    if route is not None and not route.strip():
        raise _bad("route", "Input should be a route such as provider/model")
    since = _since(query.get("since"))
    rows = await request.app[GATEWAY].store.query_requests(
        limit=limit, status=status, route=route.strip() if route is not None else None, since=since
    )
    return web.json_response({"data": [row_json(r) for r in rows]}, headers=request[BASE_HEADERS])
