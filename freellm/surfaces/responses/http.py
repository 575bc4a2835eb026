"""The ``/v1/responses`` routes: create (stream or not), retrieve and delete stored responses.

``POST /v1/responses`` parses the Responses wire, rebuilds the chained conversation when
``previous_response_id`` is given, runs the one shared turn (``respond_turn``: same engine, fallback
loop and pump as every surface) and stores the finished response unless ``store: false``. A stream's
response is stored the moment its terminal event is rendered, before those bytes reach the client, so a
client that chains off ``response.completed`` immediately always finds it.

Every refusal on these paths (auth, limits, validation, exhaustion, unknown ids) is rendered in the
Responses error shape: ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import orjson
from aiohttp import web

from freellm.engine.context import TurnOutcome
from freellm.errors import ClientError, Exhausted
from freellm.fusion.http import fusion_requested, new_fusion_id, respond_fusion
from freellm.server.body import read_json
from freellm.server.errors import register_error_style
from freellm.server.state import BASE_HEADERS, GATEWAY, Gateway
from freellm.server.turn_http import respond_turn
from freellm.surfaces.responses.ids import IdFactory, random_id
from freellm.surfaces.responses.objects import ResponseShell, end_status, output_from_result, usage_object
from freellm.surfaces.responses.request import ResponsesRequest, build_chat_request, parse_responses_request
from freellm.surfaces.responses.state import load_history, not_found, stored_doc
from freellm.surfaces.responses.stream import ResponsesStreamRenderer

__all__ = ["PATH", "register", "responses_error_body"]

log = logging.getLogger("freellm.server")

PATH = "/v1/responses"
_DAY_S = 86_400.0


def register(app: web.Application) -> None:
    app.router.add_post(PATH, create_response)
    app.router.add_get(PATH + "/{response_id}", get_response)
    app.router.add_delete(PATH + "/{response_id}", delete_response)
    register_error_style(app, PATH, responses_error_body)


def responses_error_body(exc: ClientError | Exhausted) -> dict[str, Any]:
    """OpenAI's Responses error shape: ``message``, ``type``, ``param`` and ``code`` always present."""
    env = exc.envelope()["error"]
    err: dict[str, Any] = {
        "message": env.get("message"),
        "type": env.get("type"),
        "param": env.get("param"),
        "code": env.get("code"),
    }
    if "retryAtMs" in env:
        err["retryAtMs"] = env["retryAtMs"]
    return {"error": err}


async def create_response(request: web.Request) -> web.StreamResponse:
    gw = request.app[GATEWAY]
    cfg = gw.settings.surfaces.responses
    parsed = parse_responses_request(await read_json(request))
    now = time.time()
    history: list[dict[str, Any]] = []
    if parsed.previous_response_id is not None:
        history = await load_history(
            gw.store, parsed.previous_response_id, now=now, max_depth=cfg.max_chain_depth
        )
    req = build_chat_request(parsed, history)
    fusion = fusion_requested(request, req.requested_model)
    if not fusion:
        _check_model(gw, req.requested_model)
    ids: IdFactory = random_id
    shell = ResponseShell(
        id=ids("resp"),
        created_at=int(now),
        model=parsed.model,
        instructions=parsed.instructions,
        previous_response_id=parsed.previous_response_id,
        store=parsed.store,
        echo=parsed.echo,
    )
    saver = _Saver(gw, parsed, ttl_s=cfg.store_ttl_days * _DAY_S)
    renderer = ResponsesStreamRenderer(
        shell, ids=ids, input_tokens_estimate=req.text_token_estimate, on_final=saver.schedule
    )
    input_estimate = req.text_token_estimate

    def render_completion(outcome: TurnOutcome) -> dict[str, Any]:
        result = outcome.result
        status, reason = end_status(result.finish_reason)
        usage = usage_object(
            result.usage,
            input_estimate=input_estimate,
            output_estimate=outcome.tokens_out,
            reasoning_chars=len(result.reasoning),
        )
        response = shell.build(status, output_from_result(result, ids), usage=usage, incomplete_reason=reason)
        saver.schedule(response)
        return response

    if fusion:
        metadata = parsed.echo.get("metadata") or {}
        return await respond_fusion(
            request,
            req,
            surface="responses",
            raw_options=metadata.get("fusion"),
            options_param="metadata.fusion",
            renderer=renderer,
            render_completion=render_completion,
            fusion_id=new_fusion_id(),
            created=shell.created_at,
            on_complete=saver.wait,
        )
    return await respond_turn(
        request,
        req,
        surface="responses",
        renderer=renderer,
        render_completion=render_completion,
        on_complete=saver.wait,
        # A stored response must get its own id: only `store: false` answers are cached.
        cache_variant=None if parsed.store else _cache_variant(shell),
    )


async def get_response(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    response_id = request.match_info["response_id"]
    doc = await gw.store.get_response(response_id, time.time())
    if doc is None or not isinstance(doc.get("response"), dict):
        raise not_found(response_id)
    return _json_response(request, doc["response"])


async def delete_response(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    response_id = request.match_info["response_id"]
    if not await gw.store.delete_response(response_id, time.time()):
        raise not_found(response_id)
    return _json_response(request, {"id": response_id, "object": "response", "deleted": True})


class _Saver:
    """Stores a finished response (unless ``store: false``) and lets the handler wait for the write.

    :meth:`schedule` is called synchronously by the renderers; the write runs as a task started right
    then, so it is queued ahead of any request the client can send after reading the response.
    """

    def __init__(self, gw: Gateway, parsed: ResponsesRequest, *, ttl_s: float) -> None:
        self._gw = gw
        self._parsed = parsed
        self._ttl_s = ttl_s
        self._task: asyncio.Task[None] | None = None

    def schedule(self, response: dict[str, Any]) -> None:
        if not self._parsed.store or self._task is not None or response.get("status") == "failed":
            return
        doc = stored_doc(response, self._parsed.input)
        expires_at = time.time() + self._ttl_s
        self._task = asyncio.get_running_loop().create_task(
            self._gw.store.put_response(response["id"], doc, expires_at), name=f"store-response:{response['id']}"
        )
        self._task.add_done_callback(_log_failure)

    async def wait(self, outcome: TurnOutcome) -> None:
        if self._task is not None:
            # A failed write is logged by its callback; the reply itself stands.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("could not store response: %s", task.get_name(), exc_info=task.exception())


def _cache_variant(shell: ResponseShell) -> str:
    """What the response object echoes besides the canonical request (its instructions are in it)."""
    return orjson.dumps(
        [shell.model, shell.instructions, shell.previous_response_id, shell.echo], option=orjson.OPT_SORT_KEYS
    ).decode()


def _check_model(gw: Gateway, requested: str) -> None:
    """An unknown or disabled model is a 400 on this surface (the chat surface says 404)."""
    try:
        gw.catalog.resolve(requested)
    except ClientError as exc:
        if exc.status == 404:
            raise ClientError(400, exc.message, type=exc.type, code=exc.code, param=exc.param) from None
        raise


def _json_response(request: web.Request, body: dict[str, Any]) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), content_type="application/json", headers=request[BASE_HEADERS]
    )
