"""Typed per-request state passed explicitly through the engine (no context bags, no globals)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from freellm.core.chunks import Chunk
from freellm.errors import TrailEntry, UpstreamError

if TYPE_CHECKING:
    from freellm.engine.continuation import Resume
    from freellm.engine.pump import PumpResult
    from freellm.providers.base import Provider
    from freellm.routing.catalog import ModelRoute

__all__ = ["Attempt", "CollectSink", "CompressionReport", "RequestContext", "Sink", "TurnOutcome"]


@dataclass(frozen=True, slots=True)
class CompressionReport:
    """What the compression stage did to a request it looked at (the ``X-FreeLLM-Compress`` header)."""

    mode: str
    """The effective mode, ``off`` when the request's header turned compression off."""
    saved_tokens: int
    fingerprint: str
    """Mode + configuration: part of the cache key, so two compression settings never share an entry."""

    @property
    def header(self) -> str:
        return f"{self.mode}; saved~={self.saved_tokens}"


@dataclass(slots=True)
class RequestContext:
    """One request's typed state: who is asking and how (set by the surface and the edge), and what the
    pre-routing pipeline decided (set by its stages)."""

    request_id: str
    surface: str
    started: float
    """``loop.time()`` when the request arrived."""
    started_wall: float
    """Epoch seconds when the request arrived (for logs)."""
    # -- inputs: the surface's choices and the request's own pipeline headers --------------------------
    cache_variant: str | None = None
    """What, besides the canonical request, changes this surface's bytes (the echoed model name, a
    framing). None: this request is never cached (e.g. a stored Responses API response)."""
    compressible: bool = False
    """The surface lets the compression stage rewrite the outbound messages."""
    cache_header: str | None = None
    """``X-FreeLLM-Cache`` as sent."""
    cache_control: str | None = None
    """``Cache-Control`` as sent."""
    compress_header: str | None = None
    """``X-FreeLLM-Compress`` as sent."""
    counting: bool = False
    """A count-tokens request: compressed like a real one, but not counted in the compression stats."""
    client_id: str | None = None
    """Non-secret fingerprint of the client key that authenticated the request."""
    bound_profile: str | None = None
    """The profile the client key is bound to (``auth.api_keys: [{key, profile}]``)."""
    session_header: str | None = None
    """``X-Session-Id`` as sent (validated by the session stage, never echoed)."""
    output_limit_asked: bool | None = None
    """Whether the client asked for an output limit; None: ``max_tokens`` tells (a surface that fills
    in its own default sets False)."""
    # -- outputs of the pipeline ------------------------------------------------------------------------
    compression: CompressionReport | None = None
    """Set when compression looked at the request."""
    cache_status: str | None = None
    """``HIT`` | ``MISS`` | ``BYPASS`` when the cache took part, else None (no header)."""
    cache_key: str | None = None
    """Set on a miss: where a complete answer is stored."""
    profile: str | None = None
    """The profile whose chain and prompt the request uses (bound, or ``auto:NAME``)."""
    image_bytes: tuple[int, int] | None = None
    """(decoded bytes of every ``data:`` image before, after) when the image stage looked at any."""
    session_status: str | None = None
    """``sticky`` | ``new`` for a request with a session key (the ``X-FreeLLM-Session`` header)."""
    handoff: str | None = None
    """``<previous route> → <new route>`` when a context-handoff message was inserted."""
    session_key: str | None = None
    """The conversation's session (set by the session stage when it has one)."""
    sticky_route: str | None = None
    """The route that last served this conversation, tried first (sticky sessions)."""

    def session_reply_header(self, served: str) -> dict[str, str]:
        """``X-FreeLLM-Session`` for a success served by ``served``: ``sticky`` when the remembered route
        served it, else ``new``; nothing without a session."""
        if self.session_key is None:
            return {}
        self.session_status = "sticky" if served == self.sticky_route else "new"
        return {"X-FreeLLM-Session": self.session_status}

    def log_extra(self) -> dict[str, object]:
        """What the pipeline did, for the request-log row (only what happened)."""
        extra: dict[str, object] = dict(self.pipeline_headers())
        if self.profile is not None:
            extra["profile"] = self.profile
        if self.session_status is not None:
            extra["session"] = self.session_status
        if self.handoff is not None:
            extra["handoff"] = self.handoff
        if self.image_bytes is not None:
            extra["image_bytes"] = list(self.image_bytes)
        return extra

    def pipeline_headers(self) -> dict[str, str]:
        """``X-FreeLLM-Compress`` and ``X-FreeLLM-Cache`` for every response to this request."""
        headers: dict[str, str] = {}
        if self.compression is not None:
            headers["X-FreeLLM-Compress"] = self.compression.header
        if self.cache_status is not None:
            headers["X-FreeLLM-Cache"] = self.cache_status
        return headers


@dataclass(slots=True)
class Attempt:
    """One try of one route with one key. ``key`` is the secret: never log or render it."""

    number: int
    route: ModelRoute
    provider: Provider
    key: str
    key_id: str
    key_n: int
    lease_id: str
    trail: list[TrailEntry]
    deadline: float | None = None
    """Hedge deadline (``loop.time()``), applied only until the stream commits."""
    settle: Callable[[TurnOutcome], Awaitable[None]] | None = None
    """Books the attempt's success (usage, streaks, the lease) now rather than when the fallback loop
    gets the outcome back: a stream calls it before its terminator, in the store's batch with the
    session write (one round trip). Idempotent; the loop books it itself if nobody did."""
    resume: Resume | None = None
    """Set on a continuation attempt: the committed stream it continues (stream.continue_on_failure)."""


class Sink(Protocol):
    """Where an attempt's output goes: a client stream (commit = headers) or a collector (non-stream).

    ``committed`` turns true once any byte reached the client; after that the loop never fails over.
    """

    streaming: bool
    committed: bool

    async def send(self, attempt: Attempt, chunks: list[Chunk]) -> None:
        """Send chunks, committing (headers first) on the first call."""

    async def fail(self, attempt: Attempt, message: str) -> None:
        """After commit: report the error in-band in the client's wire and terminate the stream."""

    async def end(self, outcome: TurnOutcome) -> None:
        """Terminate a successful stream (e.g. ``[DONE]``). ``outcome`` is the turn's, complete: what
        must be visible to the client's next request (the stored response, the session, the cache
        entry) can be written before the terminator lets the client send it."""


class CollectSink:
    """Non-stream: the turn is folded from the pump's result; nothing is sent until the loop returns,
    so every failure can still fail over."""

    streaming = False
    committed = False

    async def send(self, attempt: Attempt, chunks: list[Chunk]) -> None:
        return None

    async def fail(self, attempt: Attempt, message: str) -> None:
        return None

    async def end(self, outcome: TurnOutcome) -> None:
        return None


@dataclass(slots=True)
class TurnOutcome:
    """What the fallback loop returns for a turn that reached the client."""

    attempt: Attempt
    result: PumpResult
    ttfb_ms: int | None
    trail: list[TrailEntry] = field(default_factory=list)
    committed_error: UpstreamError | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    upstream_headers: Mapping[str, str] | None = None
    """The upstream answer's response headers (its rate-limit windows), for limit learning."""
    continued_from: str | None = None
    """``provider/model`` whose committed stream this turn's route continued (None: not continued)."""
