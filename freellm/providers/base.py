"""The Provider protocol: canonical request body in, canonical chunks out.

A provider owns one upstream wire: it builds the upstream HTTP request from the canonical (OpenAI chat)
body, maps every failure at its I/O boundary to :class:`~freellm.errors.UpstreamError`, and yields
canonical ``chat.completion.chunk`` dicts. It knows nothing of routing, retries or the client's wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from freellm.config import ProviderConfig
from freellm.core.chunks import Chunk
from freellm.core.embeddings import EmbeddingAnswer, EmbeddingRequest

__all__ = ["Embedder", "Provider", "Timeouts", "UpstreamStream"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-attempt time limits: connect, first byte (headers + first read), and silence between reads."""

    connect: float
    first_byte: float
    stall: float


class UpstreamStream(Protocol):
    """An opened upstream answer: iterate it for canonical chunks, then read ``saw_done``.

    ``saw_done`` is true when the upstream ended its stream properly (``[DONE]`` or the end of a
    non-stream body); an iterator that ends without it means the connection simply stopped.
    """

    saw_done: bool
    headers: Mapping[str, str] | None
    """The upstream answer's response headers (None for a synthetic answer): its rate-limit windows."""

    @property
    def buffered(self) -> bool:
        """True when the next chunk is already decoded (no read needed): the driver batches client
        writes until the buffer runs dry, so one upstream read costs one client write."""
        ...

    def __aiter__(self) -> AsyncIterator[Chunk]: ...

    def whole(self) -> list[Chunk] | None:
        """Every chunk at once when the answer is already in hand (a non-stream reply, read whole),
        handing them over; None for a stream, which is iterated."""
        ...

    async def aclose(self) -> None: ...


class Provider(Protocol):
    config: ProviderConfig

    async def open(
        self, body: dict[str, Any], key: str, *, stream: bool, timeouts: Timeouts
    ) -> UpstreamStream:
        """Send the request; return once the upstream answered 2xx. Raises UpstreamError otherwise."""
        ...

    async def probe(self, key: str, timeout_s: float) -> int | None:
        """Check ``key`` with the wire's cheapest authenticated request (``GET {base_url}/models``):
        the HTTP status, or None when no answer came (spec/core.md §10 "Health pass")."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """A provider whose wire has embeddings (OpenAI-compatible and Gemini; Anthropic has none)."""

    async def embed(self, model: str, req: EmbeddingRequest, key: str, timeouts: Timeouts) -> EmbeddingAnswer:
        """One input per vector, in order; the whole answer within ``timeouts.first_byte``. Raises
        UpstreamError like :meth:`Provider.open`."""
        ...
