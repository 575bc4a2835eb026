"""Incremental Server-Sent Events decoding and encoding.

The decoder is sans-IO (``feed(bytes) -> payloads``, ``flush()``), modelled on httpx's line decoders, so
providers can hand it whatever byte boundaries the socket produced. Each ``data:`` line is returned as
one payload (free-tier upstreams put one JSON object per line; this is also how the reference reads
them). Comments, ``event:``/``id:``/``retry:`` fields and blank lines are skipped. A line longer than
``max_line`` bytes raises :class:`SSELineTooLong` so a hostile upstream cannot grow our buffer forever.
"""

from __future__ import annotations

__all__ = ["SSEDecoder", "SSELineTooLong", "encode_data", "encode_event"]

DEFAULT_MAX_LINE = 8 * 1024 * 1024


class SSELineTooLong(ValueError):
    """An upstream sent a single SSE line longer than the decoder's cap."""


class SSEDecoder:
    """Split a byte stream into ``data:`` payloads (bytes, without the field name)."""

    __slots__ = ("_buffer", "_max_line")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._buffer = b""
        self._max_line = max_line

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buffer + data if self._buffer else data
        if b"\n" not in buf:
            if len(buf) > self._max_line:
                raise SSELineTooLong(f"SSE line exceeds {self._max_line} bytes")
            self._buffer = buf
            return []
        lines = buf.split(b"\n")
        self._buffer = lines.pop()
        if len(self._buffer) > self._max_line:
            raise SSELineTooLong(f"SSE line exceeds {self._max_line} bytes")
        out: list[bytes] = []
        for line in lines:
            payload = _data_of(line)
            if payload is not None:
                out.append(payload)
        return out

    def flush(self) -> list[bytes]:
        """Return the payload of a final line that had no trailing newline."""
        rest, self._buffer = self._buffer, b""
        payload = _data_of(rest) if rest else None
        return [payload] if payload is not None else []


def _data_of(line: bytes) -> bytes | None:
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line.startswith(b"data:"):
        return None
    payload = line[6:] if line[5:6] == b" " else line[5:]
    return payload or None


def encode_data(payload: bytes) -> bytes:
    """One SSE event carrying ``payload`` (already serialised, no newlines) as its data."""
    return b"data: " + payload + b"\n\n"


def encode_event(event: str, payload: bytes) -> bytes:
    """One named SSE event (``event:`` line then ``data:``), as the Anthropic and Responses wires use."""
    return b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n"
