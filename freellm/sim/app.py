"""The simulator's aiohttp application: virtual-provider routes and the shared request flows.

The first path segment before ``/v1`` (or ``/v1beta``) names a virtual provider, so one process stands in
for a whole fleet (``http://127.0.0.1:PORT/alpha/v1``, ``.../beta/v1``). The flows here (chat, model
lists, embeddings) are wire-neutral: auth, logging, scenario choice, first-byte delay, error statuses and
transport faults; rendering belongs to the wire (OpenAI chat completions and embeddings, Anthropic
messages, Gemini ``generateContent`` and ``embedContent``/``batchEmbedContents``) and building the
responses to :mod:`freellm.sim.responses`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

import orjson
from aiohttp import web

from freellm.sim.anthropic_wire import ANTHROPIC_WIRE
from freellm.sim.control_api import add_control_routes
from freellm.sim.embeddings import EmbeddingsDialect
from freellm.sim.gemini_wire import GEMINI_UNARY_WIRE, embed_dialect_for_action, split_target, wire_for_action
from freellm.sim.keys import SIM_STATE
from freellm.sim.openai_embeddings import OPENAI_EMBEDDINGS
from freellm.sim.openai_wire import OPENAI_WIRE
from freellm.sim.plan import Plan, build_plan
from freellm.sim.responses import (
    Headers,
    error_response,
    json_response,
    missing_key_message,
    with_scenario_headers,
)
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
    embeddings = _embeddings_handler(OPENAI_EMBEDDINGS)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_post("/{provider}/v1/embeddings", embeddings)
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


def _embeddings_handler(dialect: EmbeddingsDialect) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await _handle_embeddings(request, dialect, "")

    return handle


def _gemini_handler() -> Handler:
    """``POST …/models/{model}:{action}``: ``embedContent``/``batchEmbedContents`` are embeddings; for
    the chat actions the Gemini wire instance depends on the action and ``alt``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        model, action = split_target(request.match_info["target"])
        embed = embed_dialect_for_action(action)
        if embed is not None and model:
            return await _handle_embeddings(request, embed, model)
        wire = wire_for_action(action, request.query.get("alt"))
        if wire is None or not model:
            message = f"Method not found: {action or request.match_info['target']}"
            return json_response(404, GEMINI_UNARY_WIRE.render_error(404, message), {})
        return await _handle_chat(request, wire)

    return handle


async def _handle_chat(request: web.Request, wire: Wire) -> web.StreamResponse:
    """The request flow every wire shares: record, check, choose a scenario, answer."""
    state = request.app[SIM_STATE]
    provider = request.match_info.get("provider", DEFAULT_PROVIDER)
    key = wire.credential(request)
    body = await _read_body(request)
    record = state.new_record(provider, key, body)
    await state.notify_arrival()
    return await _recorded(state, record, _serve(request, wire, state, record, provider, key, body))


async def _read_body(request: web.Request) -> Any:
    """The decoded JSON body, or its text when it is not JSON (logged as received, refused by the wire)."""
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", errors="replace")


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
        return json_response(401, wire.render_error(401, missing_key_message(wire)), headers)
    scenario, source = state.choose_models(provider, key)
    record.source = source
    if scenario is None:
        record.status = 200
        record.end(Outcome.COMPLETED)
        return json_response(200, wire.models_list(provider, state.settings.models), headers)
    if scenario.first_byte_delay_ms:
        await asyncio.sleep(scenario.first_byte_delay_ms / 1000.0)
    if scenario.status is not None:
        return error_response(wire, scenario, record, headers)
    record.status = 200
    record.end(Outcome.COMPLETED)
    listing = wire.models_list(provider, state.settings.models)
    return json_response(200, listing, with_scenario_headers(headers, scenario))


async def _recorded(
    state: SimState, record: RequestRecord, serve: Coroutine[Any, Any, web.StreamResponse]
) -> web.StreamResponse:
    """Run ``serve``, recording on ``record`` how a request ended when ``serve`` could not say so, and
    counting it in ``state.in_flight`` while it runs."""
    state.in_flight += 1
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
    finally:
        state.in_flight -= 1


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
        return json_response(status, payload, headers)

    if key is None:
        return finish(401, wire.render_error(401, missing_key_message(wire)), Outcome.UNAUTHORIZED)
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
    headers = with_scenario_headers(headers, scenario)

    if scenario.first_byte_delay_ms:
        await asyncio.sleep(scenario.first_byte_delay_ms / 1000.0)
    if scenario.status is not None:
        return error_response(wire, scenario, record, headers)

    response_id = wire.new_response_id()
    plan = build_plan(scenario, provider, view.model, view.prompt_chars, response_id[-8:])
    created = int(time.time())
    settings = state.settings
    if view.stream:
        frames = wire.render_stream(plan, scenario, view, response_id, created)
        response = web.StreamResponse(
            status=200, headers=with_scenario_headers(wire.stream_headers, scenario)
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

    fault = await _unanswered(request, scenario, state, record)
    if fault is not None:
        return fault
    if scenario.chunk_delay_ms:
        # A non-stream answer takes as long as the stream would have: one delay between output chunks.
        await asyncio.sleep(max(0, _output_chunks(plan) - 1) * scenario.chunk_delay_ms / 1000.0)
    if scenario.inband_error is not None:
        # Some providers answer a failed non-stream call with 200 and an error object.
        return finish(200, wire.render_inband_error(scenario.inband_error), Outcome.INBAND_ERROR)
    return finish(200, wire.render_completion(plan, scenario, view, response_id, created), Outcome.COMPLETED)


async def _unanswered(
    request: web.Request, scenario: Scenario, state: SimState, record: RequestRecord
) -> web.Response | None:
    """A non-stream answer's transport fault, if scripted: ``cut_after`` closes the connection without
    any response, ``stall_after`` never answers (the earlier one wins, a cut on a tie)."""
    if scenario.cut_after is not None and (
        scenario.stall_after is None or scenario.cut_after <= scenario.stall_after
    ):
        cut_connection(request)
        record.end(Outcome.CUT)
        return web.Response(status=499)  # never reaches the client: the connection is gone
    if scenario.stall_after is not None:
        settings = state.settings
        record.end(await stall(request, state.closing, settings.stall_max_s, settings.disconnect_poll_s))
        return web.Response(status=499)
    return None


async def _handle_embeddings(
    request: web.Request, dialect: EmbeddingsDialect, path_model: str
) -> web.StreamResponse:
    """An embeddings request (``path_model``: the model of a Gemini URL): logged with ``endpoint:
    embeddings`` and scriptable like chat, because a gateway's fallback and cooldowns must be testable
    on this endpoint too."""
    state = request.app[SIM_STATE]
    provider = request.match_info.get("provider", DEFAULT_PROVIDER)
    key = dialect.wire.credential(request)
    body = await _read_body(request)
    record = state.new_record(provider, key, body, endpoint="embeddings")
    await state.notify_arrival()
    serve = _serve_embeddings(request, dialect, path_model, state, record, provider, key, body)
    return await _recorded(state, record, serve)


async def _serve_embeddings(
    request: web.Request,
    dialect: EmbeddingsDialect,
    path_model: str,
    state: SimState,
    record: RequestRecord,
    provider: str,
    key: str | None,
    body: Any,
) -> web.StreamResponse:
    """Answer an embeddings request: an embeddings script's status, delay, cut or stall if one matches,
    else the vectors. Defaults and inline directives never apply (they describe chat answers)."""
    headers: Headers = {REQUEST_ID_HEADER: record.id}

    def finish(status: int, payload: Any, outcome: Outcome) -> web.Response:
        record.status = status
        record.end(outcome)
        return json_response(status, payload, headers)

    wire = dialect.wire
    if key is None:
        return finish(401, wire.render_error(401, missing_key_message(wire)), Outcome.UNAUTHORIZED)
    try:
        call = dialect.parse(body, path_model)
    except WireRequestError as exc:
        return finish(400, dialect.render_bad_request(exc), Outcome.BAD_REQUEST)
    record.model = call.model
    view = RequestView(
        model=call.model, stream=False, prompt_chars=0, last_user_text="", messages_json=call.match_json
    )
    scenario, record.source = state.choose_embeddings(provider, call.model, key, view)
    if scenario is not None:
        if scenario.first_byte_delay_ms:
            await asyncio.sleep(scenario.first_byte_delay_ms / 1000.0)
        if scenario.status is not None:
            return error_response(wire, scenario, record, headers)
        fault = await _unanswered(request, scenario, state, record)
        if fault is not None:
            return fault
        headers = with_scenario_headers(headers, scenario)
    return finish(200, dialect.render(call, state.settings.embedding_dimensions), Outcome.COMPLETED)


def _output_chunks(plan: Plan) -> int:
    return len(plan.reasoning_pieces) + len(plan.text_pieces) + sum(1 + len(t.fragments) for t in plan.tools)
