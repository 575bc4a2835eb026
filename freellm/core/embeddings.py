"""The canonical embeddings request and answer: what every embeddings surface parses into and every
embedding-capable provider answers with.

Embeddings are not chat: there is no stream, no pump and no tools, so they have their own two small
types rather than a corner of :class:`~freellm.core.request.ChatRequest`. They still go through the
same router, fallback loop, failure classifier, limits, leases and request log.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from freellm.core.tokens import estimate_text_tokens

__all__ = ["EmbeddingAnswer", "EmbeddingInput", "EmbeddingRequest", "vector_base64"]

EmbeddingInput = str | tuple[int, ...]
"""One input: text, or the token ids of an OpenAI-wire client that tokenised it itself."""


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    """One embeddings request, whichever wire it came in on."""

    requested_model: str
    """The family name, ``provider/model`` pin, a member's model id, or ``auto``/empty."""
    inputs: tuple[EmbeddingInput, ...]
    dimensions: int | None = None
    """The vector length asked for (OpenAI ``dimensions``, Gemini ``outputDimensionality``)."""
    task_type: str | None = None
    """Gemini's ``taskType`` (``RETRIEVAL_QUERY`` …): forwarded to Gemini-wire upstreams only."""
    titles: tuple[str | None, ...] = ()
    """Gemini's document ``title`` per input (with ``RETRIEVAL_DOCUMENT``): Gemini-wire upstreams only."""
    user: str | None = None
    """OpenAI's end-user id: forwarded to OpenAI-wire upstreams only."""

    stream: ClassVar[bool] = False
    """Embeddings never stream (the request log's column)."""

    @property
    def token_input(self) -> bool:
        """Some input is token ids: only an OpenAI-wire upstream can take it."""
        return any(not isinstance(item, str) for item in self.inputs)

    @property
    def token_estimate(self) -> int:
        """ceil(chars / 4) per text (at least 1), the length of each token list: the routing estimate,
        and the usage when the upstream reports none (Gemini never does)."""
        return sum(max(1, estimate_text_tokens(len(i))) if isinstance(i, str) else len(i) for i in self.inputs)

    def texts(self) -> list[str]:
        """The inputs as text (token ids never reach a wire that needs text: the engine checks)."""
        return [i if isinstance(i, str) else "" for i in self.inputs]

    def first_text(self) -> str:
        """What the request log keeps of the request when ``logging.bodies`` is on."""
        first = self.inputs[0] if self.inputs else ""
        return first if isinstance(first, str) else " ".join(map(str, first))


@dataclass(frozen=True, slots=True)
class EmbeddingAnswer:
    """An upstream's vectors, one per input and in input order."""

    vectors: list[list[float]]
    prompt_tokens: int | None = None
    """What the upstream counted (None: it did not say; the estimate is used)."""
    headers: Mapping[str, str] | None = None
    """The upstream answer's headers (rate-limit windows, for limit learning)."""


def vector_base64(vector: Sequence[float]) -> str:
    """OpenAI's ``encoding_format: base64``: the vector as little-endian float32, base64-encoded (what
    the official SDKs ask for by default and decode)."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
