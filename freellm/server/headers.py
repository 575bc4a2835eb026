"""Response header values (spec §6): safe encoding and the routing / fallback headers.

Header values keep SP and visible ASCII; everything else — control characters (header injection), DEL,
every non-ASCII code point, and ``%`` itself — becomes its percent-encoded UTF-8 bytes, so a value stays
decodable with ``urllib.parse.unquote`` and the decode is unambiguous. Values are capped without ever
splitting an escape.

Pure string work; the common case (a plain ASCII ``provider/model``) returns its input unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from freellm.engine.redact import redact
from freellm.errors import TrailEntry

__all__ = [
    "DEFAULT_MAX_LEN",
    "DETAIL_MAX_LEN",
    "TRAIL_MAX_LEN",
    "detail_header",
    "encode_header_value",
    "routing_headers",
    "trail_header",
]

DEFAULT_MAX_LEN: Final = 256
TRAIL_MAX_LEN: Final = 1024
DETAIL_MAX_LEN: Final = 2048
TRAIL_MAX_SHOWN: Final = 10
DETAIL_MSG_MAX: Final = 120
_REPLACEMENT: Final = "%EF%BF%BD"  # U+FFFD for a lone surrogate, which has no UTF-8 form


def encode_header_value(value: str, max_len: int = DEFAULT_MAX_LEN) -> str:
    """``value`` as a safe header value, at most ``max_len`` chars (escapes are never split)."""
    if len(value) <= max_len and value.isascii() and value.isprintable() and "%" not in value:
        return value  # fast path: SP and visible ASCII only, nothing to encode
    out: list[str] = []
    used = 0
    for ch in value:
        if " " <= ch <= "~" and ch != "%":
            piece = ch
        else:
            try:
                piece = "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
            except UnicodeEncodeError:
                piece = _REPLACEMENT
        if used + len(piece) > max_len:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out)


def _more(total: int) -> str:
    extra = total - TRAIL_MAX_SHOWN
    return f"; +{extra} more" if extra > 0 else ""


def trail_header(trail: Sequence[TrailEntry], max_len: int = TRAIL_MAX_LEN) -> str:
    """``X-Fallback-Trail``: ``p/m key1=rate_limited; p2/m2 key2=timeout`` (≤ 10, then ``; +N more``)."""
    value = "; ".join(e.label for e in trail[:TRAIL_MAX_SHOWN]) + _more(len(trail))
    return encode_header_value(value, max_len)


def detail_header(trail: Sequence[TrailEntry], max_len: int = DETAIL_MAX_LEN) -> str:
    """``X-Fallback-Detail``: ``p/m keyN=<class> t=<offset>+<dur>ms msg=<≤120 chars>`` per failed hop.

    The message is redacted again, cut to 120 chars, and its ``;`` become ``,`` (``; `` separates hops).
    """
    parts: list[str] = []
    for e in trail[:TRAIL_MAX_SHOWN]:
        part = f"{e.label} t={e.started_ms}+{e.duration_ms}ms"
        if e.message:
            msg = redact(e.message, limit=None)[:DETAIL_MSG_MAX].replace(";", ",")
            if msg:
                part += f" msg={msg}"
        parts.append(part)
    return encode_header_value("; ".join(parts) + _more(len(trail)), max_len)


def routing_headers(
    routed_via: str | None,
    trail: Sequence[TrailEntry],
    *,
    detail: bool,
    max_len: int = DEFAULT_MAX_LEN,
    trail_max_len: int = TRAIL_MAX_LEN,
    detail_max_len: int = DETAIL_MAX_LEN,
) -> dict[str, str]:
    """``X-Routed-Via`` (when routed), and for a non-empty trail ``X-Fallback-Attempts``,
    ``X-Fallback-Trail`` and (with ``detail``) ``X-Fallback-Detail``."""
    headers: dict[str, str] = {}
    if routed_via:
        headers["X-Routed-Via"] = encode_header_value(routed_via, max_len)
    if trail:
        headers["X-Fallback-Attempts"] = str(len(trail))
        headers["X-Fallback-Trail"] = trail_header(trail, trail_max_len)
        if detail:
            headers["X-Fallback-Detail"] = detail_header(trail, detail_max_len)
    return headers
