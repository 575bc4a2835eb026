"""The simulator's control plane under ``/_sim/``: scripts, defaults, reset, the request log and waits.

JSON in, JSON out, no auth: the simulator is a test and demo tool bound to localhost. Waiting uses the
per-request ``asyncio.Event``, so ``/_sim/wait`` answers the moment a request ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from freellm.sim.keys import SIM_STATE
from freellm.sim.scenario import ScenarioError, parse_scenario
from freellm.sim.state import ENDPOINTS, Endpoint

__all__ = ["add_control_routes"]

_SCRIPT_KEYS = frozenset({"provider", "model", "match", "key", "times", "scenario", "endpoint"})
_DEFAULT_KEYS = frozenset({"provider", "model", "scenario"})


class _BadControl(Exception):
    """A control request is malformed; becomes a 400 with the message."""


def add_control_routes(app: web.Application) -> None:
    """Register every ``/_sim/`` route on ``app``."""
    r = app.router
    r.add_post("/_sim/script", _post_script)
    r.add_get("/_sim/scripts", _get_scripts)
    r.add_post("/_sim/default", _post_default)
    r.add_post("/_sim/reset", _post_reset)
    r.add_get("/_sim/requests", _get_requests)
    r.add_get("/_sim/wait", _get_wait)
    r.add_get("/_sim/health", _get_health)
    r.add_get("/_sim/connections", _get_connections)


def _reply(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


async def _json_object(request: web.Request, allowed: frozenset[str]) -> dict[str, Any]:
    try:
        data = orjson.loads(await request.read() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise _BadControl(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise _BadControl("body must be a JSON object")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _BadControl(f"unknown field(s) {unknown}; allowed: {', '.join(sorted(allowed))}")
    return data


def _script_endpoint(data: dict[str, Any]) -> Endpoint:
    value = data.get("endpoint", "chat")
    for endpoint in ENDPOINTS:
        if value == endpoint:
            return endpoint
    raise _BadControl(f"'endpoint' must be one of {', '.join(ENDPOINTS)}, got {value!r}")


def _endpoint_filter(query: Mapping[str, str]) -> Endpoint | None:
    """``?endpoint=chat|models|embeddings|all`` (default chat) → the log filter (``None`` = every
    endpoint)."""
    value = query.get("endpoint", "chat")
    if value == "all":
        return None
    for endpoint in ENDPOINTS:
        if value == endpoint:
            return endpoint
    raise _BadControl(f"'endpoint' must be one of {', '.join((*ENDPOINTS, 'all'))}, got {value!r}")


def _opt_str(data: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = data.get(name, default)
    if value is not None and (not isinstance(value, str) or not value):
        raise _BadControl(f"{name!r} must be a non-empty string")
    return value


async def _post_script(request: web.Request) -> web.Response:
    try:
        data = await _json_object(request, _SCRIPT_KEYS)
        provider = _opt_str(data, "provider", "default")
        model = _opt_str(data, "model", "*")
        times = data.get("times", 1)
        if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
            raise _BadControl("'times' must be an integer >= 1 or null (until reset)")
        endpoint = _script_endpoint(data)
        match = _opt_str(data, "match")
        key = _opt_str(data, "key")
        if endpoint == "models" and (model != "*" or match is not None):
            # A model-list request names no model and carries no messages: such a script could never
            # apply, and silently never applying is how a fault script makes a test pass by accident.
            raise _BadControl("'model' and 'match' do not apply to endpoint 'models' (only 'key' does)")
        scenario = parse_scenario(data.get("scenario"))
    except (_BadControl, ScenarioError) as exc:
        return _reply({"error": str(exc)}, 400)
    assert provider is not None and model is not None
    script = request.app[SIM_STATE].add_script(
        provider, model, match, key, times, scenario, data.get("scenario"), endpoint
    )
    return _reply(script.to_dict())


async def _get_scripts(request: web.Request) -> web.Response:
    state = request.app[SIM_STATE]
    return _reply({"scripts": [s.to_dict() for queue in state.scripts.values() for s in queue]})


async def _post_default(request: web.Request) -> web.Response:
    try:
        data = await _json_object(request, _DEFAULT_KEYS)
        provider = _opt_str(data, "provider")
        model = _opt_str(data, "model", "*")
        raw = data.get("scenario")
        scenario = None if raw is None else parse_scenario(raw)
    except (_BadControl, ScenarioError) as exc:
        return _reply({"error": str(exc)}, 400)
    assert model is not None
    request.app[SIM_STATE].set_default(provider, model, scenario)
    return _reply({"ok": True})


async def _post_reset(request: web.Request) -> web.Response:
    request.app[SIM_STATE].reset()
    return _reply({"ok": True})


async def _get_requests(request: web.Request) -> web.Response:
    q = request.query
    try:
        endpoint = _endpoint_filter(q)
    except _BadControl as exc:
        return _reply({"error": str(exc)}, 400)
    records = request.app[SIM_STATE].find_records(q.get("provider"), q.get("match"), q.get("model"), endpoint)
    return _reply({"requests": [r.to_dict() for r in records]})


async def _get_wait(request: web.Request) -> web.Response:
    """``state=ended&request_id=ID``: until that request ended. ``state=received&provider=P&count=N``
    (``&endpoint=chat|models|embeddings|all``, default chat): until N such requests for P (any provider without
    one) have arrived."""
    q = request.query
    request_id = q.get("request_id", "")
    try:
        timeout = float(q.get("timeout", "5"))
    except ValueError:
        return _reply({"error": "'timeout' must be a number of seconds"}, 400)
    state = q.get("state", "ended")
    if state == "received":
        try:
            endpoint = _endpoint_filter(q)
        except _BadControl as exc:
            return _reply({"error": str(exc)}, 400)
        return await _wait_received(request, q.get("provider"), q.get("count", "1"), timeout, endpoint)
    if state != "ended":
        return _reply({"error": "'state' must be ended or received"}, 400)
    record = request.app[SIM_STATE].records.get(request_id)
    if record is None:
        return _reply({"error": f"no request {request_id!r} in the log"}, 404)
    try:
        await asyncio.wait_for(record.ended.wait(), timeout)
    except TimeoutError:
        return _reply({"error": "timeout", "request": record.to_dict()}, 408)
    return _reply(record.to_dict())


async def _wait_received(
    request: web.Request, provider: str | None, count: str, timeout: float, endpoint: Endpoint | None
) -> web.Response:
    if not count.isdigit() or int(count) < 1:
        return _reply({"error": "'count' must be an integer >= 1"}, 400)
    state = request.app[SIM_STATE]
    try:
        await asyncio.wait_for(state.wait_received(provider, int(count), endpoint), timeout)
    except TimeoutError:
        received = len(state.find_records(provider, endpoint=endpoint))
        return _reply({"error": "timeout", "received": received}, 408)
    return _reply({"requests": [r.to_dict() for r in state.find_records(provider, endpoint=endpoint)]})


async def _get_health(request: web.Request) -> web.Response:
    state = request.app[SIM_STATE]
    return _reply({"status": "ok", "models": state.settings.models, "logged_requests": len(state.records)})


async def _get_connections(request: web.Request) -> web.Response:
    """Requests still being answered and TCP connections still open: what a reliability test reads
    once its load has ended, to prove the gateway let go of every upstream connection."""
    return _reply(request.app[SIM_STATE].connections())
