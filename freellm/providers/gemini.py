"""Gemini upstreams (``kind: gemini``): Google AI Studio's ``generativelanguage.googleapis.com`` and hosts
that speak its wire.

``POST {base_url}/models/{model}:generateContent`` (non-stream) or ``:streamGenerateContent?alt=sse``
(stream), with the key in the ``x-goog-api-key`` header only (never in the URL, where it would end up in
proxy and access logs). ``base_url`` is the API root including the version
(``https://generativelanguage.googleapis.com/v1beta``). Headers in the provider config are sent too and
win.

The canonical body is translated by :func:`~freellm.providers.gemini_wire.to_gemini_request` and the
answer by :class:`~freellm.providers.gemini_wire.GeminiStreamTranslator`; timeouts, transport failures
and HTTP errors go through the shared plumbing (:mod:`freellm.providers.http`), error bodies worded by
:func:`~freellm.providers.gemini_wire.gemini_error_message` with the ``RetryInfo.retryDelay`` as the
retry hint (Gemini sends no ``Retry-After``).

App-lifetime state, all on the instance (one provider per configured provider, one per app):

* the **thought-signature cache** (:class:`~freellm.providers.gemini_wire.SignatureCache`): signatures
  Gemini put on the function calls of one answer are put back on those calls when the client replays
  them in the next request;
* nothing else: remote images are fetched per attempt (a retry on another key fetches them again).

**Remote images** (``image_url`` with an http(s) URL) must be sent inline, so the provider fetches them
through the app's HTTP session before the request, bounded by what a request may make the gateway fetch:
at most ``image_max_count`` URLs per request, each at most ``image_max_bytes``, all within
``image_fetch_timeout_s``; only ``http``/``https``; only hosts whose every address is public (loopback,
private, link-local, carrier-grade NAT, multicast and reserved addresses are refused, so a client cannot
make the gateway read its own network — ``allow_private_image_hosts`` lifts that for trusted setups; the
rule is the gateway's one SSRF guard, :mod:`freellm.net.ssrf` ``Reach.PUBLIC``, docs/security.md);
redirects are followed by hand (at most 3), each hop checked again; the answer must be an image. A URL
that fails any of this is skipped (the model sees the rest of the message); the reason is logged at
debug level. Residual risk: the address check and the connection resolve the name separately, so a
hostile DNS server could still rebind between the two.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

import aiohttp
import orjson
import yarl

from freellm.config import ProviderConfig
from freellm.core.embeddings import EmbeddingAnswer, EmbeddingRequest
from freellm.errors import UpstreamError
from freellm.net.ssrf import HostRefused, Reach, check_host, is_public
from freellm.providers.base import Timeouts
from freellm.providers.embedding_wire import GEMINI_BATCH_MAX, gemini_batch_body, gemini_embedding_answer
from freellm.providers.gemini_wire import (
    GeminiStreamTranslator,
    InlineData,
    SignatureCache,
    fetchable_urls,
    gemini_error_message,
    inband_error,
    response_to_chunks,
    retry_delay_of,
    sniff_image_type,
    to_gemini_request,
)
from freellm.providers.gemini_wire.signatures import DEFAULT_MAX_ENTRIES, DEFAULT_TTL_S
from freellm.providers.http import CompletionStream, SSEStream, post_json, probe_status, read_body

__all__ = [
    "DEFAULT_IMAGE_FETCH_TIMEOUT_S",
    "DEFAULT_IMAGE_MAX_BYTES",
    "DEFAULT_IMAGE_MAX_COUNT",
    "GeminiProvider",
    "GeminiStream",
]

log = logging.getLogger(__name__)

DEFAULT_IMAGE_MAX_BYTES: Final = 8 * 1024 * 1024
DEFAULT_IMAGE_MAX_COUNT: Final = 16
DEFAULT_IMAGE_FETCH_TIMEOUT_S: Final = 15.0
MAX_IMAGE_REDIRECTS: Final = 3
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_READ_CHUNK: Final = 64 * 1024


class _Refused(Exception):
    """An image URL the gateway will not fetch (the message says why; logged, never raised further)."""


class GeminiProvider:
    """One configured Gemini-wire provider, sharing the app's pooled HTTP session."""

    def __init__(
        self,
        config: ProviderConfig,
        session: aiohttp.ClientSession,
        *,
        image_max_bytes: int = DEFAULT_IMAGE_MAX_BYTES,
        image_max_count: int = DEFAULT_IMAGE_MAX_COUNT,
        image_fetch_timeout_s: float = DEFAULT_IMAGE_FETCH_TIMEOUT_S,
        allow_private_image_hosts: bool = False,
        signature_max_entries: int = DEFAULT_MAX_ENTRIES,
        signature_ttl_s: float = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._session = session
        self._base = config.base_url.rstrip("/")
        self._extra_headers = dict(config.headers)
        self.image_max_bytes = image_max_bytes
        self.image_max_count = image_max_count
        self.image_fetch_timeout_s = image_fetch_timeout_s
        self.allow_private_image_hosts = allow_private_image_hosts
        self.signatures = SignatureCache(signature_max_entries, signature_ttl_s, clock=clock)

    async def probe(self, key: str, timeout_s: float) -> int | None:
        headers = {"x-goog-api-key": key, **self._extra_headers}
        return await probe_status(self._session, self._base + "/models", headers, timeout_s)

    # ---- the request -------------------------------------------------------------------------------

    def url(self, model: str, *, stream: bool) -> str:
        """``{base}/models/{model}:generateContent`` or ``…:streamGenerateContent?alt=sse``."""
        if model.startswith(("models/", "tunedModels/")):
            path = "/".join(urllib.parse.quote(seg, safe="") for seg in model.split("/"))
        else:
            path = "models/" + urllib.parse.quote(model, safe="")
        if stream:
            return f"{self._base}/{path}:streamGenerateContent?alt=sse"
        return f"{self._base}/{path}:generateContent"

    def build_body(
        self, body: dict[str, Any], *, media: dict[str, InlineData] | None = None
    ) -> dict[str, Any]:
        """The Gemini request body for a canonical upstream body (``media``: fetched remote images)."""
        return to_gemini_request(body, signatures=self.signatures, media=media)

    async def open(
        self, body: dict[str, Any], key: str, *, stream: bool, timeouts: Timeouts
    ) -> GeminiStream | CompletionStream:
        model = body.get("model") if isinstance(body.get("model"), str) else ""
        assert isinstance(model, str)
        urls = fetchable_urls(body)
        media = await self.fetch_images(urls) if urls else None
        payload = orjson.dumps(self.build_body(body, media=media))
        resp = await self._post(self.url(model, stream=stream), payload, key, timeouts, stream=stream)
        translator = GeminiStreamTranslator(model=model, on_call=self._remember)
        if stream:
            return GeminiStream(resp, timeouts.stall, translator)
        raw = await read_body(resp)
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UpstreamError("malformed upstream completion: not JSON") from exc
        if isinstance(answer, list) and len(answer) == 1:
            answer = answer[0]
        if not isinstance(answer, dict):
            raise UpstreamError("malformed upstream completion: not an object")
        if "error" in answer and not answer.get("candidates"):
            raise inband_error(answer)
        return CompletionStream(response_to_chunks(answer, model=model, on_call=self._remember), resp.headers)

    async def embed(self, model: str, req: EmbeddingRequest, key: str, timeouts: Timeouts) -> EmbeddingAnswer:
        """``:batchEmbedContents``, :data:`GEMINI_BATCH_MAX` inputs per call, one call after another (each
        is one request against the key's limits, like the API counts it)."""
        url = self.url(model, stream=False).removesuffix(":generateContent") + ":batchEmbedContents"
        texts = req.texts()
        vectors: list[list[float]] = []
        last_headers = None
        for start in range(0, len(texts), GEMINI_BATCH_MAX):
            part = texts[start : start + GEMINI_BATCH_MAX]
            payload = orjson.dumps(gemini_batch_body(req, model, start, part))
            resp = await self._post(url, payload, key, timeouts, stream=False)
            vectors += gemini_embedding_answer(await read_body(resp), len(part))
            last_headers = resp.headers
        return EmbeddingAnswer(vectors, None, last_headers)

    async def _post(
        self, url: str, payload: bytes, key: str, timeouts: Timeouts, *, stream: bool
    ) -> aiohttp.ClientResponse:
        """POST with the key in its header; an error's back-off read from the body when Gemini put it
        there (``google.rpc.RetryInfo``) rather than in ``Retry-After``."""
        headers = {
            "x-goog-api-key": key,
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            **self._extra_headers,
        }
        try:
            return await post_json(
                self._session, url, payload, headers, timeouts, stream=stream, message_of=gemini_error_message
            )
        except UpstreamError as exc:
            if exc.retry_after_s is None and exc.body is not None:
                exc.retry_after_s = retry_delay_of(exc.body)
            raise

    def _remember(
        self, call_id: str, name: str, args: dict[str, Any], signature: str | None, native: bool
    ) -> None:
        self.signatures.remember(call_id, name, args, signature, native_id=native)

    # ---- remote images -----------------------------------------------------------------------------

    async def fetch_images(self, urls: list[str]) -> dict[str, InlineData]:
        """Fetch what may be fetched of ``urls`` (limits in the module doc); failures are left out."""
        wanted = urls[: self.image_max_count]
        if len(urls) > len(wanted):
            log.debug(
                "gemini %s: %d image URL(s) over the per-request limit skipped",
                self.config.name,
                len(urls) - len(wanted),
            )
        tasks = {asyncio.ensure_future(self._fetch_image(url)): url for url in wanted}
        out: dict[str, InlineData] = {}
        try:
            done, _ = await asyncio.wait(tasks, timeout=self.image_fetch_timeout_s)
        finally:
            pending = [t for t in tasks if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                log.debug(
                    "gemini %s: %d image(s) not fetched within %gs",
                    self.config.name,
                    len(pending),
                    self.image_fetch_timeout_s,
                )
        for task in done:
            if task.cancelled() or task.exception() is not None:
                continue
            inline = task.result()
            if inline is not None:
                out[tasks[task]] = inline
        return out

    async def _fetch_image(self, url: str) -> InlineData | None:
        try:
            return await self._fetch_image_checked(url)
        except _Refused as exc:
            log.debug("gemini %s: image not fetched: %s", self.config.name, exc)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            log.debug("gemini %s: image fetch failed: %s", self.config.name, type(exc).__name__)
        return None

    async def _fetch_image_checked(self, url: str) -> InlineData:
        current = yarl.URL(url)
        for _ in range(MAX_IMAGE_REDIRECTS + 1):
            if current.scheme not in ("http", "https") or not current.host:
                raise _Refused("only http(s) URLs are fetched")
            if not self.allow_private_image_hosts:
                await _check_public_host(current.host, current.port)
            async with self._session.get(
                current, allow_redirects=False, headers={"Accept": "image/*"}
            ) as resp:
                if resp.status in _REDIRECTS:
                    location = resp.headers.get("Location")
                    if not location:
                        raise _Refused("redirect without a location")
                    current = current.join(yarl.URL(location))
                    continue
                if resp.status != 200:
                    raise _Refused(f"status {resp.status}")
                length = resp.content_length
                if length is not None and length > self.image_max_bytes:
                    raise _Refused(f"larger than {self.image_max_bytes} bytes")
                data = bytearray()
                async for piece in resp.content.iter_chunked(_READ_CHUNK):
                    data.extend(piece)
                    if len(data) > self.image_max_bytes:
                        raise _Refused(f"larger than {self.image_max_bytes} bytes")
                mime = (resp.content_type or "").lower()
                if not mime.startswith("image/"):
                    sniffed = sniff_image_type(bytes(data[:16]))
                    if sniffed is None:
                        raise _Refused(f"not an image ({mime or 'no content type'})")
                    mime = sniffed
                if not data:
                    raise _Refused("empty body")
                return {"mimeType": mime, "data": base64.b64encode(bytes(data)).decode()}
        raise _Refused("too many redirects")


def _is_public(address: str) -> bool:
    """The one public-address rule (:func:`freellm.net.ssrf.is_public`); ValueError for a name."""
    return is_public(address)


async def _check_public_host(host: str, port: int | None) -> None:
    """Raise :class:`_Refused` unless every address ``host`` names is public (:mod:`freellm.net.ssrf`,
    ``Reach.PUBLIC``: the shared guard, so image URLs and run-time provider URLs follow one rule book)."""
    try:
        await check_host(host.strip("[]"), port, Reach.PUBLIC)
    except HostRefused as exc:
        raise _Refused(str(exc)) from None


class GeminiStream(SSEStream):
    """Canonical chunks of one ``:streamGenerateContent?alt=sse`` answer.

    Each ``data:`` payload is one ``GenerateContentResponse`` (a JSON array of them is accepted too);
    payloads that are not JSON objects are skipped. Gemini has no end-of-stream marker, so ``saw_done``
    is set at the end of the connection when a ``finishReason`` arrived (else the pump calls the stream
    cut); an ``{"error": …}`` payload is raised after the chunks before it.
    """

    __slots__ = ("_translator",)

    def __init__(
        self, resp: aiohttp.ClientResponse, stall_s: float, translator: GeminiStreamTranslator
    ) -> None:
        super().__init__(resp, stall_s)
        self._translator = translator

    def _frames(self, payloads: list[bytes]) -> None:
        translator = self._translator
        for payload in payloads:
            try:
                decoded = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            for response in decoded if isinstance(decoded, list) else (decoded,):
                if not isinstance(response, dict):
                    continue
                try:
                    self._pending.extend(translator.feed(response))
                except UpstreamError as exc:
                    self._error = exc  # raised once the chunks before it are consumed
                    return

    def _eof(self) -> None:
        self._pending.extend(self._translator.finish())
        self.saw_done = self._translator.done
