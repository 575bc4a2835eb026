"""The simulator's aiohttp application: virtual-provider routes and the shared request flow.

The first path segment before ``/v1`` (or ``/v1beta``) names a virtual provider, so one process stands in
for a whole fleet (``http://127.0.0.1:PORT/alpha/v1``, ``.../beta/v1``). The flow here is wire-neutral:
auth, logging, scenario choice, first-byte delay, error statuses and transport faults; rendering belongs
to the wire (OpenAI chat completions, Anthropic messages, Gemini ``generateContent``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Final

import orjson
from aiohttp import web
from multidict import CIMultiDict

from freellm.sim.anthropic_wire import ANTHROPIC_WIRE
from freellm.sim.control_api import add_control_routes
from freellm.sim.gemini_wire import GEMINI_UNARY_WIRE, split_target, wire_for_action
from freellm.sim.keys import SIM_STATE
from freellm.sim.openai_wire import OPENAI_WIRE
from freellm.sim.plan import Plan, build_plan
from freellm.sim.scenario import Scenario, ScenarioError, find_inline_directive, pick_from_directive
from freellm.sim.settings import SimSettings
from freellm.sim.state import Outcome, RequestRecord, SimState
from freellm.sim.stream import cut_connection, play_frames, stall
from freellm.sim.wire import RequestView, Wire, WireRequestError

__all__ = ["DEFAULT_PROVIDER", "create_sim_app"]

DEFAULT_PROVIDER: Final = "default"
"""Provider name for the un-prefixed ``/v1/...`` routes."""
REQUEST_ID_HEADER: Final = "X-Sim-Request-Id"
CLIENT_MAX_SIZE: Final = 64 * 1024 * 1024  # gateway tests send images; aiohttp's 1 MiB default is too small

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def create_sim_app(settings: SimSettings | None = None) -> web.Application:
    """Build a simulator app; all state lives on it, so several can run in one process."""
    app = web.Application(client_max_size=CLIENT_MAX_SIZE)
    app[SIM_STATE] = SimState(settings or SimSettings())
    chat = _chat_handler(OPENAI_WIRE)
    models = _v1_models_handler()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/{provider}/v1/chat/completions", chat)
    messages = _chat_handler(ANTHROPIC_WIRE)
    app.router.add_post("/v1/messages", messages)
    app.router.add_post("/{provider}/v1/messages", messages)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/{provider}/v1/models", models)
    gemini = _gemini_handler()
    gemini_models = _models_handler(GEMINI_UNARY_WIRE)
    for version in ("v1beta", "v1"):  # google-genai 3.x defaults to /v1; Gemini CLI and the docs use /v1beta
        app.router.add_post(f"/{version}/models/{{target}}", gemini)
        app.router.add_post(f"/{{provider}}/{version}/models/{{target}}", gemini)
    app.router.add_get("/v1beta/models", gemini_models)
    app.router.add_get("/{provider}/v1beta/models", gemini_models)
    add_control_routes(app)
    app.on_shutdown.append(_on_shutdown)
    return app


async def _on_shutdown(app: web.Application) -> None:
    # Stalled requests would otherwise hold the server open for the full stall_max_s.
    app[SIM_STATE].closing.set()


Headers = Mapping[str, str]


def _with_scenario_headers(base: Headers, scenario: Scenario) -> CIMultiDict[str]:
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


def _json_response(status: int, body: Any, headers: Headers) -> web.Response:
    return _response(status, "application/json", headers, orjson.dumps(body))


def _models_handler(wire: Wire) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await _handle_models(request, wire)

    return handle


def _v1_models_handler() -> Handler:
    """``GET …/v1/models``: one path for two wires, told apart the way their clients announce themselves.

    Anthropic clients always send ``anthropic-version`` (and usually ``x-api-key``); OpenAI-style clients
    send neither. The wire decides the listing's shape, where the key is read from and the error
    envelope of a scripted status, so a gateway probing an Anthropic key sees what Anthropic would send.
    """

    async def handle(request: web.Request) -> web.StreamResponse:
        headers = request.headers
        anthropic = "anthropic-version" in headers or "x-api-key" in headers
        return await _handle_models(request, ANTHROPIC_WIRE if anthropic else OPENAI_WIRE)

    return handle


def _chat_handler(wire: Wire) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await _handle_chat(request, wire)

    return handle


def _gemini_handler() -> Handler:
    """``POST …/models/{model}:{action}``: the Gemini wire instance depends on the action and ``alt``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        model, action = split_target(request.match_info["target"])
        wire = wire_for_action(action, request.query.get("alt"))
        if wire is None or not model:
            message = f"Method not found: {action or request.match_info['target']}"
            return _json_response(404, GEMINI_UNARY_WIRE.render_error(404, message), {})
        return await _handle_chat(request, wire)

    return handle


async def _handle_chat(request: web.Request, wire: Wire) -> web.StreamResponse:
    """The request flow every wire shares: record, check, choose a scenario, answer."""
    state = request.app[SIM_STATE]
    provider = request.match_info.get("provider", DEFAULT_PROVIDER)
    key = wire.credential(request)
    raw = await request.read()
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = raw.decode("utf-8", errors="replace")
    record = state.new_record(provider, key, body)
    await state.notify_arrival()
    return await _recorded(state, record, _serve(request, wire, state, record, provider, key, body))


async def _handle_models(request: web.Request, wire: Wire) -> web.StreamResponse:
    """A model-list request: logged (``endpoint: models``) and scriptable like a chat request, because
    gateways use it to probe keys and a test must be able to make that probe fail for one key."""
    state = request.app[SIM_STATE]
    provider = request.match_info.get("provider", DEFAULT_PROVIDER)
    key = wire.credential(request)
    record = state.new_record(provider, key, None, endpoint="models")
    await state.notify_arrival()
    return await _recorded(state, record, _serve_models(wire, state, record, provider, key))


async def _serve_models(
    wire: Wire, state: SimState, record: RequestRecord, provider: str, key: str | None
) -> web.StreamResponse:
    """Answer a model-list request: a models script's status (and its error fields, headers and
    first-byte delay) if one matches, else the plain listing. Other scenario fields do not apply."""
    headers = {REQUEST_ID_HEADER: record.id}
    if key is None:
        record.status = 401
        record.end(Outcome.UNAUTHORIZED)
        return _json_response(401, wire.render_error(401, _missing_key_message(wire)), headers)
    scenario, source = state.choose_models(provider, key)
    record.source = source
    if scenario is None:
        record.status = 200
        record.end(Outcome.COMPLETED)
        return _json_response(200, wire.models_list(provider, state.settings.models), headers)
    if scenario.first_byte_delay_ms:
        await asyncio.sleep(scenario.first_byte_delay_ms / 1000.0)
    if scenario.status is not None:
        return _error_response(wire, scenario, record, headers)
    record.status = 200
    record.end(Outcome.COMPLETED)
    listing = wire.models_list(provider, state.settings.models)
    return _json_response(200, listing, _with_scenario_headers(headers, scenario))


async def _recorded(
    state: SimState, record: RequestRecord, serve: Coroutine[Any, Any, web.StreamResponse]
) -> web.StreamResponse:
    """Run ``serve``, recording on ``record`` how a request ended when ``serve`` could not say so."""
    try:
        return await serve
    except ConnectionError:
        record.end(Outcome.CLIENT_DISCONNECTED)
        return web.Response(status=499)  # never reaches the vanished client
    except asyncio.CancelledError:
        record.end(Outcome.SERVER_CLOSED if state.closing.is_set() else Outcome.CLIENT_DISCONNECTED)
        raise
    except Exception:
        record.end(Outcome.INTERNAL_ERROR)
        raise


def _select(state: SimState, provider: str, view: RequestView, key: str | None) -> tuple[Scenario, str]:
    """Inline ``[[sim:...]]`` directive first (it travels with the request), then scripts and defaults."""
    text = view.last_user_text
    if "[[sim:" in text:
        directive = find_inline_directive(text)
        if directive is not None:
            picked = pick_from_directive(directive, provider, view.model)
            if picked is not None:
                return picked, "inline"
    return state.choose(provider, view.model, key, view)


async def _serve(
    request: web.Request,
    wire: Wire,
    state: SimState,
    record: RequestRecord,
    provider: str,
    key: str | None,
    body: Any,
) -> web.StreamResponse:
    """Answer one chat request as its scenario says, recording the outcome on ``record``."""
    headers: Headers = {REQUEST_ID_HEADER: record.id}

    def finish(status: int, payload: Any, outcome: Outcome) -> web.Response:
        record.status = status
        record.end(outcome)
        return _json_response(status, payload, headers)

    if key is None:
        return finish(401, wire.render_error(401, _missing_key_message(wire)), Outcome.UNAUTHORIZED)
    try:
        view = wire.parse_request(body, request.match_info)
    except WireRequestError as exc:
        return finish(400, wire.render_error(400, str(exc)), Outcome.BAD_REQUEST)
    record.model = view.model
    record.stream = view.stream
    try:
        scenario, source = _select(state, provider, view, key)
    except ScenarioError as exc:
        return finish(400, wire.render_error(400, f"simulator: {exc}"), Outcome.BAD_REQUEST)
    record.source = source
    headers = _with_scenario_headers(headers, scenario)

    if scenario.first_byte_delay_ms:
        await asyncio.sleep(scenario.first_byte_delay_ms / 1000.0)
    if scenario.status is not None:
        return _error_response(wire, scenario, record, headers)

    response_id = wire.new_response_id()
    plan = build_plan(scenario, provider, view.model, view.prompt_chars, response_id[-8:])
    created = int(time.time())
    settings = state.settings
    if view.stream:
        frames = wire.render_stream(plan, scenario, view, response_id, created)
        response = web.StreamResponse(
            status=200, headers=_with_scenario_headers(wire.stream_headers, scenario)
        )
        response.headers[REQUEST_ID_HEADER] = record.id
        record.status = 200
        await response.prepare(request)
        outcome = await play_frames(
            request,
            response,
            frames,
            scenario,
            state.closing,
            settings.stall_max_s,
            settings.disconnect_poll_s,
        )
        if outcome is None:
            await response.write_eof()
            outcome = Outcome.INBAND_ERROR if scenario.inband_error is not None else Outcome.COMPLETED
        record.end(outcome)
        return response

    # Non-stream: cut = close without any response, stall = never answer.
    if scenario.cut_after is not None and (
        scenario.stall_after is None or scenario.cut_after <= scenario.stall_after
    ):
        cut_connection(request)
        record.end(Outcome.CUT)
        return web.Response(status=499)
    if scenario.stall_after is not None:
        record.end(await stall(request, state.closing, settings.stall_max_s, settings.disconnect_poll_s))
        return web.Response(status=499)
    if scenario.chunk_delay_ms:
        # A non-stream answer takes as long as the stream would have: one delay between output chunks.
        await asyncio.sleep(max(0, _output_chunks(plan) - 1) * scenario.chunk_delay_ms / 1000.0)
    if scenario.inband_error is not None:
        # Some providers answer a failed non-stream call with 200 and an error object.
        return finish(200, wire.render_inband_error(scenario.inband_error), Outcome.INBAND_ERROR)
    return finish(200, wire.render_completion(plan, scenario, view, response_id, created), Outcome.COMPLETED)


def _missing_key_message(wire: Wire) -> str:
    message = getattr(wire, "missing_key_message", None)
    return message if isinstance(message, str) else "Missing bearer authentication"


def _output_chunks(plan: Plan) -> int:
    return len(plan.reasoning_pieces) + len(plan.text_pieces) + sum(1 + len(t.fragments) for t in plan.tools)


def _error_response(wire: Wire, scenario: Scenario, record: RequestRecord, headers: Headers) -> web.Response:
    """The scripted HTTP error, for stream and non-stream requests and model-list probes alike, with the
    scenario's scripted ``headers``."""
    headers = _with_scenario_headers(headers, scenario)
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
    return _json_response(status, error_body, headers)


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
