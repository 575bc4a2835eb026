"""Typed per-request state passed explicitly through the engine (no context bags, no globals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from freellm.core.chunks import Chunk
from freellm.errors import TrailEntry, UpstreamError

if TYPE_CHECKING:
    from freellm.engine.pump import PumpResult
    from freellm.providers.base import Provider
    from freellm.routing.catalog import ModelRoute

__all__ = ["Attempt", "RequestContext", "Sink", "TurnOutcome"]


@dataclass(slots=True)
class RequestContext:
    request_id: str
    surface: str
    started: float
    """``loop.time()`` when the request arrived."""
    started_wall: float
    """Epoch seconds when the request arrived (for logs)."""


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

    async def end(self) -> None:
        """Terminate a successful stream (e.g. ``[DONE]``)."""


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
