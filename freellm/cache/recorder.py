"""Capturing a stream's bytes for the cache while they go to the client.

A :class:`StreamRecorder` exists only for a request that may be stored (with the cache off or bypassed
nothing is retained). It keeps every byte written after the commit, gives up — and frees what it held —
once the stream passes ``max_bytes``, and remembers what makes a stream unfit to replay: a
``finish_reason: length`` (truncated), an in-band error after the commit. A stream is *complete* once its
terminator is rendered; only then may it be stored — which happens before the terminator is written, so
the entry exists (on every replica) by the time the client can ask again.
"""

from __future__ import annotations

from freellm.core.chunks import Chunk

__all__ = ["StreamRecorder"]


class StreamRecorder:
    __slots__ = ("_parts", "_size", "errored", "max_bytes", "overflowed", "terminated", "truncated")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self.overflowed = False
        self.truncated = False
        """The turn ended with ``finish_reason: length``."""
        self.errored = False
        self.terminated = False

    def chunks(self, chunks: list[Chunk], data: bytes) -> None:
        """A batch of canonical chunks and the bytes they were rendered to."""
        for chunk in chunks:
            for choice in chunk.get("choices") or ():
                if choice.get("finish_reason") == "length":
                    self.truncated = True
        self.write(data)

    def write(self, data: bytes) -> None:
        if self.overflowed:
            return
        self._size += len(data)
        if self._size > self.max_bytes:
            self.overflowed = True
            self._parts = []
            return
        self._parts.append(data)

    def fail(self) -> None:
        self.errored = True

    def end(self, data: bytes) -> None:
        """The terminator is rendered: the stream is complete."""
        self.write(data)
        self.terminated = True

    @property
    def storable(self) -> bool:
        return self.terminated and not (self.errored or self.truncated or self.overflowed)

    def payload(self) -> bytes:
        return b"".join(self._parts)
