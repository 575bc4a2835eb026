"""Simulated embeddings: deterministic vectors, token counts and what every embeddings dialect shares.

A gateway's embeddings tests need answers they can predict (a cache hit must return the very vector the
upstream gave, a fallback to another model must visibly change it), so a vector is a pure function of
``(model, text, dimensions)``: :func:`sim_vector`. Values are rounded to float32, so the ``float`` and the
``base64`` (little-endian float32) encodings carry exactly the same numbers and a client decoding either
sees identical vectors.

The wires (OpenAI ``/v1/embeddings`` in :mod:`freellm.sim.openai_embeddings`, Gemini ``embedContent`` and
``batchEmbedContents`` in :mod:`freellm.sim.gemini_wire.embed`) parse a body into an
:class:`EmbeddingCall` and render it back; the shared request flow in :mod:`freellm.sim.app` only sees
the :class:`EmbeddingsDialect` protocol.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from freellm.sim.wire import Wire, WireRequestError

__all__ = [
    "MAX_DIMENSIONS",
    "EmbeddingCall",
    "EmbeddingInput",
    "EmbeddingRequestError",
    "EmbeddingsDialect",
    "decode_base64",
    "encode_base64",
    "sim_vector",
    "text_tokens",
    "tokens_text",
]

MAX_DIMENSIONS: Final = 3072
"""The largest vector the simulator renders (the widest real embedding models: text-embedding-3-large,
gemini-embedding-001); a request asking for more is a 400, as upstream."""
_FLOAT32: Final = struct.Struct("<f")


class EmbeddingRequestError(WireRequestError):
    """An embeddings body the wire would refuse: a 400 in the wire's envelope, naming ``param`` (the
    offending field) where the wire reports one (OpenAI does). A plain :class:`WireRequestError` (what
    the Gemini field helpers raise) is a refusal without a ``param``."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class EmbeddingInput:
    """One text to embed: what the vector is derived from, its prompt tokens, its requested width."""

    text: str
    tokens: int
    dimensions: int | None = None
    """``None``: the simulator's ``embedding_dimensions`` setting."""


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """An embeddings request as the flow needs it: the model, the inputs in order and the encoding."""

    model: str
    inputs: tuple[EmbeddingInput, ...]
    match_json: Callable[[], str]
    """The request's inputs as JSON text, which a script's ``match`` searches (built only when asked)."""
    base64: bool = False

    @property
    def prompt_tokens(self) -> int:
        """The ``usage.prompt_tokens`` of the whole request."""
        return sum(item.tokens for item in self.inputs)

    def vectors(self, default_dimensions: int) -> list[list[float]]:
        """One :func:`sim_vector` per input, in order."""
        return [
            sim_vector(self.model, item.text, item.dimensions or default_dimensions) for item in self.inputs
        ]


class EmbeddingsDialect(Protocol):
    """One wire's embeddings endpoint: how its body reads and its answer looks.

    ``wire`` is the chat wire of the same provider family: it reads the key and renders the error
    envelopes (scripted statuses, the 401), so an embeddings error looks like that provider's chat error.
    """

    @property
    def wire(self) -> Wire:
        """The chat wire whose credential and error envelopes this endpoint shares."""
        ...

    def parse(self, body: Any, path_model: str) -> EmbeddingCall:
        """Read a decoded JSON body (``path_model``: the model named by the URL, ``""`` when none);
        raise :class:`~freellm.sim.wire.WireRequestError` (an :class:`EmbeddingRequestError` to name
        the field) when the wire would refuse it."""
        ...

    def render(self, call: EmbeddingCall, default_dimensions: int) -> Any:
        """The 200 answer as a JSON value."""
        ...

    def render_bad_request(self, error: WireRequestError) -> Any:
        """The 400 body for a refused request."""
        ...


def sim_vector(model: str, text: str, dimensions: int) -> list[float]:
    """The simulated embedding of ``text`` by ``model``: unit length, ``dimensions`` floats.

    The bytes are SHA-256 in counter mode over ``model``, a NUL and ``text`` (the separator keeps
    ``("ab", "c")`` and ``("a", "bc")`` apart), read as unsigned 32-bit integers and mapped to
    ``[-1, 1)``; the vector is L2-normalised and each value rounded to float32 (so its base64 form
    decodes to the same numbers). The same arguments always give the same vector.
    """
    if dimensions < 1:
        raise ValueError(f"dimensions must be >= 1, got {dimensions}")
    seed = hashlib.sha256(model.encode() + b"\0" + text.encode()).digest()
    raw = bytearray()
    block = 0
    while len(raw) < 4 * dimensions:
        raw += hashlib.sha256(seed + block.to_bytes(4, "big")).digest()
        block += 1
    values = [u / 2**31 - 1.0 for u in struct.unpack(f"<{dimensions}I", raw[: 4 * dimensions])]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [_FLOAT32.unpack(_FLOAT32.pack(v / norm))[0] for v in values]


def text_tokens(text: str) -> int:
    """Prompt tokens of a text input: one per four characters (rounded up), at least one."""
    return max(1, math.ceil(len(text) / 4))


def tokens_text(tokens: Sequence[int]) -> str:
    """What a token-array input is hashed as: its decimal token ids joined by spaces (``"1 2 3"``)."""
    return " ".join(str(t) for t in tokens)


def encode_base64(vector: Sequence[float]) -> str:
    """A vector as OpenAI's ``encoding_format: "base64"`` sends it: base64 of little-endian float32s."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def decode_base64(data: str) -> list[float]:
    """The inverse of :func:`encode_base64` (what the openai SDK does with such an answer)."""
    raw = base64.b64decode(data)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))
