"""The simulator's Gemini wire: the :class:`~freellm.sim.wire.Wire` object, its three instances and routing.

``POST /{provider}/v1beta/models/{model}:generateContent`` (non-stream),
``…:streamGenerateContent?alt=sse`` (SSE, one ``GenerateContentResponse`` per ``data:`` line) and
``…:streamGenerateContent`` without ``alt`` (a streamed JSON array of responses), with the key in
``x-goog-api-key``. :func:`wire_for_action` picks one of three instances by action and ``alt``.

This module is the thin seam the shared request flow in :mod:`freellm.sim.app` talks to: it reads the
key and the few facts of a request (after :mod:`.request_checks` has checked it) and hands rendering to
:mod:`.render` (answers) and :mod:`.errors` (error bodies).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

import orjson
from aiohttp import web

from freellm.sim.gemini_wire.errors import error_body, inband_error_body
from freellm.sim.gemini_wire.render import Mode, render_completion, render_stream
from freellm.sim.gemini_wire.request_checks import check_request
from freellm.sim.plan import Frame, Plan
from freellm.sim.scenario import Scenario
from freellm.sim.wire import RequestView

__all__ = [
    "GEMINI_ACTIONS",
    "GEMINI_JSON_STREAM_WIRE",
    "GEMINI_SSE_WIRE",
    "GEMINI_UNARY_WIRE",
    "GeminiWire",
    "split_target",
    "wire_for_action",
]

GEMINI_ACTIONS: Final = frozenset({"generateContent", "streamGenerateContent"})


def split_target(target: str) -> tuple[str, str]:
    """``"gemini-2.5-flash:streamGenerateContent"`` → ``("gemini-2.5-flash", "streamGenerateContent")``."""
    model, sep, action = target.rpartition(":")
    if not sep:
        return target, ""
    return model.removeprefix("models/"), action


class GeminiWire:
    """Stateless renderer/reader for one of the three Gemini answer shapes."""

    name = "gemini"
    missing_key_message = (
        "Method doesn't allow unregistered callers (callers without established identity). Please use "
        "API Key or other form of API consumer identity to call this API."
    )

    def __init__(self, mode: Mode) -> None:
        self.mode: Mode = mode
        self.stream_headers: Mapping[str, str] = (
            {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            if mode == "sse"
            else {"Content-Type": "application/json; charset=UTF-8"}
        )

    def credential(self, request: web.BaseRequest) -> str | None:
        """The ``x-goog-api-key`` header (the only place freellm may put a key; ``?key=`` is not read)."""
        key = request.headers.get("x-goog-api-key", "").strip()
        return key or None

    def new_response_id(self) -> str:
        """A response id in Gemini's style (url-safe base64 text)."""
        return "sim" + secrets.token_urlsafe(15)

    def parse_request(self, body: Any, route: Mapping[str, str]) -> RequestView:
        """Check the body as the Gemini API does; raise :class:`WireRequestError` with its wording."""
        model = route.get("model") or split_target(route.get("target", ""))[0]
        check_request(body, model)
        contents: list[dict[str, Any]] = body["contents"]
        system = body.get("systemInstruction") or body.get("system_instruction")
        system_text = _text_of((system or {}).get("parts")) if isinstance(system, dict) else ""
        prompt_chars = len(system_text) + sum(len(_text_of(c.get("parts"))) for c in contents)
        last_user = ""
        for content in contents:
            if content.get("role", "user") == "user":
                text = _text_of(content.get("parts"))
                if text:
                    last_user = text

        def messages_json() -> str:
            listed = {"systemInstruction": system, "contents": contents} if system else {"contents": contents}
            return orjson.dumps(listed).decode()

        return RequestView(
            model=model,
            stream=self.mode != "unary",
            prompt_chars=prompt_chars,
            last_user_text=last_user,
            messages_json=messages_json,
        )

    # ---- answers ------------------------------------------------------------------------------

    def render_stream(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> list[Frame]:
        """All frames of the stream; transport faults (cut, stall, delays) are left to the driver."""
        return render_stream(self.mode, plan, scenario, view, response_id)

    def render_completion(
        self, plan: Plan, scenario: Scenario, view: RequestView, response_id: str, created: int
    ) -> dict[str, Any]:
        """The ``GenerateContentResponse`` carrying the same thoughts, text, calls and usage."""
        return render_completion(plan, scenario, view, response_id)

    def render_error(self, status: int, message: str) -> dict[str, Any]:
        """Google's ``{"error": {code, message, status, details?}}`` envelope."""
        return error_body(status, message, None)

    def render_error_with_retry(self, status: int, message: str, retry_after: str | None) -> dict[str, Any]:
        """The envelope with a ``google.rpc.RetryInfo`` detail (Gemini's only retry hint) when given."""
        return error_body(status, message, retry_after)

    def render_inband_error(self, message: str) -> dict[str, Any]:
        """The error object sent as a stream frame (or as a 200 body for a non-stream request)."""
        return inband_error_body(message)

    def models_list(self, provider: str, models: list[str]) -> dict[str, Any]:
        """Gemini's ``GET /v1beta/models`` body."""
        return {
            "models": [
                {
                    "name": f"models/{m}",
                    "version": "001",
                    "displayName": m,
                    "inputTokenLimit": 1048576,
                    "outputTokenLimit": 65536,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                }
                for m in models
            ]
        }


GEMINI_UNARY_WIRE: Final = GeminiWire("unary")
GEMINI_SSE_WIRE: Final = GeminiWire("sse")
GEMINI_JSON_STREAM_WIRE: Final = GeminiWire("json")


def wire_for_action(action: str, alt: str | None) -> GeminiWire | None:
    """The wire instance for ``:generateContent`` / ``:streamGenerateContent[?alt=sse]`` (None: unknown)."""
    if action == "generateContent":
        return GEMINI_UNARY_WIRE
    if action == "streamGenerateContent":
        return GEMINI_SSE_WIRE if (alt or "").lower() == "sse" else GEMINI_JSON_STREAM_WIRE
    return None


def _text_of(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )
