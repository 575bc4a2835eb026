"""The incremental SSE decoder at awkward byte boundaries."""

from __future__ import annotations

import pytest

from freellm.wire.sse import SSEDecoder, SSELineTooLong, encode_data, encode_event

STREAM = b'data: {"a":1}\n\n: keep-alive\n\nevent: x\ndata:{"b":2}\r\n\r\ndata: [DONE]\n\n'


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 64])
def test_any_split_yields_the_same_payloads(step: int) -> None:
    dec = SSEDecoder()
    out: list[bytes] = []
    for i in range(0, len(STREAM), step):
        out.extend(dec.feed(STREAM[i : i + step]))
    out.extend(dec.flush())
    assert out == [b'{"a":1}', b'{"b":2}', b"[DONE]"]


def test_final_line_without_newline_is_flushed() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: tail") == []
    assert dec.flush() == [b"tail"]


def test_line_cap() -> None:
    dec = SSEDecoder(max_line=10)
    with pytest.raises(SSELineTooLong):
        dec.feed(b"data: " + b"x" * 20)


def test_encoders() -> None:
    assert encode_data(b"{}") == b"data: {}\n\n"
    assert encode_event("message_start", b"{}") == b"event: message_start\ndata: {}\n\n"
