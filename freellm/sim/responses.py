"""Building the simulator's HTTP responses: JSON bodies, scripted headers and scripted error statuses.

Shared by every request flow in :mod:`freellm.sim.app` (chat, model lists, embeddings), so a scripted
``status`` looks the same whichever endpoint it hits: the wire's envelope, ``Retry-After`` as the header
(or, on Gemini, as ``RetryInfo`` in the body) and the scenario's ``headers`` on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from freellm.sim.scenario import Scenario
from freellm.sim.state import Outcome, RequestRecord
from freellm.sim.wire import Wire

__all__ = [
    "Headers",
    "error_response",
    "json_response",
    "missing_key_message",
    "with_scenario_headers",
]

Headers = Mapping[str, str]


def with_scenario_headers(base: Headers, scenario: Scenario) -> CIMultiDict[str]:
    """``base`` with the scenario's scripted ``headers`` on top (case-insensitively: they replace a
    header of the same name, the wire's ``Content-Type`` included, rather than being sent twice)."""
    merged: CIMultiDict[str] = CIMultiDict(base)
    for name, value in scenario.headers.items():
        merged[name] = value
    return merged


def _response(status: int, content_type: str, headers: Headers, body: bytes | str) -> web.Response:
    """A response with ``content_type`` unless the headers (a scripted Content-Type) already name one,
    which is then sent exactly as scripted (aiohttp would refuse both, or append a charset to it)."""
    if "Content-Type" in CIMultiDict(headers):
        data = body.encode() if isinstance(body, str) else body
        return web.Response(status=status, headers=headers, body=data)
    if isinstance(body, str):
        return web.Response(status=status, text=body, content_type=content_type, headers=headers)
    return web.Response(status=status, body=body, content_type=content_type, headers=headers)


def json_response(status: int, body: Any, headers: Headers) -> web.Response:
    """``body`` as ``application/json`` (unless a scripted header names another type)."""
    return _response(status, "application/json", headers, orjson.dumps(body))


def missing_key_message(wire: Wire) -> str:
    """The wire's own 401 wording for a request without a key (bearer wording unless it has one)."""
    message = getattr(wire, "missing_key_message", None)
    return message if isinstance(message, str) else "Missing bearer authentication"


def error_response(wire: Wire, scenario: Scenario, record: RequestRecord, headers: Headers) -> web.Response:
    """The scripted HTTP error, for chat, model-list and embeddings requests alike, with the scenario's
    scripted ``headers``; records the status and the ``error_status`` outcome on ``record``."""
    headers = with_scenario_headers(headers, scenario)
    status = scenario.status
    assert status is not None
    # Gemini states the back-off in the body (google.rpc.RetryInfo), never as a Retry-After header.
    render_with_retry = getattr(wire, "render_error_with_retry", None)
    retry_in_body = (
        callable(render_with_retry)
        and scenario.error_body is None
        and scenario.retry_after is not None
        and _seconds(scenario.retry_after) is not None
    )
    if scenario.retry_after is not None and not retry_in_body:
        headers = CIMultiDict(headers)
        headers["Retry-After"] = scenario.retry_after
    record.status = status
    record.end(Outcome.ERROR_STATUS)
    error_body = scenario.error_body
    if isinstance(error_body, str):
        # A string is sent as is: the HTML error page of a proxy in front of the provider, say.
        content_type = "text/html" if error_body.lstrip().startswith("<") else "text/plain"
        return _response(status, content_type, headers, error_body)
    if error_body is None:
        message = scenario.error_message or _default_message(status)
        if retry_in_body:
            assert callable(render_with_retry) and scenario.retry_after is not None
            error_body = render_with_retry(status, message, _seconds(scenario.retry_after))
        else:
            error_body = wire.render_error(status, message)
    return json_response(status, error_body, headers)


def _seconds(retry_after: str) -> str | None:
    """A ``Retry-After`` value in seconds as text (``"17"``, ``"1.5"``), or None for an HTTP date."""
    try:
        value = float(retry_after)
    except ValueError:
        return None
    return retry_after.strip() if value >= 0 else None


def _default_message(status: int) -> str:
    if status == 429:
        return "Rate limit exceeded (simulated)"
    return f"Simulated upstream error {status}"
