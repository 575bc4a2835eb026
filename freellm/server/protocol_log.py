"""Malformed HTTP logged as one line per event, never a traceback.

aiohttp answers a request it cannot parse (bad request line, bad or oversized headers, a broken chunked
body) with a 400 itself and logs it through its ``aiohttp.server`` logger with ``exc_info`` — a
multi-line traceback for every garbage packet, which lets any unauthenticated client write as much to
the gateway's log as it can send. :class:`ProtocolLogger` is the logger the app hands aiohttp
(``handler_args={"logger": ...}``): it writes those events as one line naming the peer and the parse
error (whitespace collapsed, non-ASCII escaped, capped), and passes every other record — a real bug's
traceback included — through unchanged. The level stays aiohttp's (debug for a first request whose
method is not HTTP, typically TLS sent to a plain port; error otherwise) so existing logging setups keep
their meaning.

The same one-line form is used by the edge middleware when a body turns out malformed while a handler
reads it (:func:`describe_protocol_error`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["ProtocolLogger", "describe_protocol_error"]

_MAX_DETAIL: Final = 200

ExcInfo = BaseException | tuple[type[BaseException], BaseException, TracebackType | None] | bool | None


def describe_protocol_error(exc: HttpProcessingError) -> str:
    """``ClassName: message`` on one line: aiohttp's parser messages span lines (a caret under the bad
    byte) and quote the client's bytes, so whitespace is collapsed, non-ASCII escaped and the result cut."""
    text = " ".join(str(exc.message or "").split())
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(ch if " " <= ch <= "~" else f"\\x{ord(ch):02x}" for ch in text)
    if len(text) > _MAX_DETAIL:
        text = text[:_MAX_DETAIL] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _protocol_error(exc_info: ExcInfo) -> HttpProcessingError | None:
    exc = exc_info[1] if isinstance(exc_info, tuple) else exc_info
    return exc if isinstance(exc, HttpProcessingError) else None


class ProtocolLogger(logging.LoggerAdapter[logging.Logger]):
    """``aiohttp.server``'s logger with parse errors folded to one line (see the module doc)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        super().__init__(logger if logger is not None else logging.getLogger("aiohttp.server"), {})

    def log(  # type: ignore[override]  # the keyword set LoggerAdapter.log forwards, spelled out
        self,
        level: int,
        msg: object,
        *args: object,
        exc_info: ExcInfo = None,
        stack_info: bool = False,
        stacklevel: int = 1,
        extra: Mapping[str, object] | None = None,
        **kwargs: Any,
    ) -> None:
        exc = _protocol_error(exc_info)
        if exc is None:
            super().log(
                level, msg, *args, exc_info=exc_info, stack_info=stack_info, stacklevel=stacklevel, extra=extra
            )
            return
        peer = args[0] if args else "?"  # aiohttp's format: "Error handling request from %s", remote
        if self.isEnabledFor(level):
            self.logger.log(level, "malformed HTTP request from %s: %s", peer, describe_protocol_error(exc))
