"""Anthropic Messages upstreams (``kind: anthropic``): api.anthropic.com and compatible hosts.

``POST {base_url}/messages`` with ``x-api-key`` and ``anthropic-version``; the canonical body is
translated by :func:`~freellm.providers.anthropic_wire.to_messages_request` and the answer (SSE events or
a ``message`` object) by :class:`~freellm.providers.anthropic_wire.AnthropicStreamTranslator` /
:func:`~freellm.providers.anthropic_wire.message_to_chunks`. Timeouts, transport failures and HTTP
errors are mapped exactly as for OpenAI-compatible upstreams (:mod:`freellm.providers.http`); error
bodies are worded ``<error type>: <message>`` so the classifier reads Anthropic's vocabulary.

``base_url`` is the API root including ``/v1`` (``https://api.anthropic.com/v1``). Headers in the
provider config are sent too and win (``anthropic-beta``, or another ``anthropic-version``).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from freellm.config import ProviderConfig
from freellm.errors import UpstreamError
from freellm.providers.anthropic_wire import (
    ANTHROPIC_VERSION,
    DEFAULT_MAX_TOKENS,
    AnthropicStreamTranslator,
    anthropic_error_message,
    message_to_chunks,
    to_messages_request,
)
from freellm.providers.base import Timeouts
from freellm.providers.http import CompletionStream, SSEStream, post_json, probe_status, read_body

__all__ = ["AnthropicProvider", "AnthropicStream"]


class AnthropicProvider:
    """One configured Anthropic-wire provider, sharing the app's pooled HTTP session.

    ``default_max_tokens`` is sent when the client set no ``max_tokens`` (Anthropic requires one).
    """

    def __init__(
        self,
        config: ProviderConfig,
        session: aiohttp.ClientSession,
        *,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.config = config
        self._session = session
        self._url = config.base_url.rstrip("/") + "/messages"
        self._models_url = config.base_url.rstrip("/") + "/models"
        self._extra_headers = dict(config.headers)
        self._default_max_tokens = default_max_tokens

    async def probe(self, key: str, timeout_s: float) -> int | None:
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, **self._extra_headers}
        return await probe_status(self._session, self._models_url, headers, timeout_s)

    def build_body(self, body: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        """The Anthropic request body for a canonical upstream body."""
        return to_messages_request({**body, "stream": stream}, default_max_tokens=self._default_max_tokens)

    async def open(
        self, body: dict[str, Any], key: str, *, stream: bool, timeouts: Timeouts
    ) -> AnthropicStream | CompletionStream:
        headers = {
            "x-api-key": key,
            "anthropic-version": ANTHROPIC_VERSION,
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            **self._extra_headers,
        }
        payload = orjson.dumps(self.build_body(body, stream=stream))
        resp = await post_json(
            self._session, self._url, payload, headers, timeouts, stream=stream, message_of=anthropic_error_message
        )
        if stream:
            return AnthropicStream(resp, timeouts.stall)
        raw = await read_body(resp)
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError("malformed upstream completion: not JSON") from exc
        if not isinstance(message, dict):
            raise UpstreamError("malformed upstream completion: not an object")
        return CompletionStream(message_to_chunks(message), resp.headers)


class AnthropicStream(SSEStream):
    """Canonical chunks of one streamed Anthropic answer; ``saw_done`` once ``message_stop`` arrived.

    Each ``data:`` object carries its event name as ``type`` (Anthropic repeats the ``event:`` line
    there), so the ``event:`` lines themselves are not needed. Payloads that are not JSON objects with a
    ``type`` are skipped, as for the OpenAI wire.
    """

    __slots__ = ("_translator",)

    def __init__(self, resp: aiohttp.ClientResponse, stall_s: float) -> None:
        super().__init__(resp, stall_s)
        self._translator = AnthropicStreamTranslator()

    def _frames(self, payloads: list[bytes]) -> None:
        translator = self._translator
        for payload in payloads:
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if not isinstance(kind, str):
                continue
            try:
                self._pending.extend(translator.feed(kind, event))
            except UpstreamError as exc:
                self._error = exc  # raised once the chunks before it are consumed
                return
            if translator.done:
                self.saw_done = True
                return

    def _eof(self) -> None:
        self._pending.extend(self._translator.finish())
