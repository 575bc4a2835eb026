"""``data:`` URLs (RFC 2397) as the canonical request carries images: parse one into its MIME type and
decoded bytes, build one back.

Parsing is lenient where real clients differ and strict where the bytes are at stake: the base64 may
be wrapped in whitespace, use the URL-safe alphabet (the ``google-genai`` SDK sends ``inlineData``
that way) or lack its padding; it must otherwise be valid base64, the URL must say ``;base64`` and its
MIME type must be an ``image/…`` one.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

from freellm.images.errors import ImageDataError

__all__ = ["DataUrl", "build_data_url", "decode_base64", "is_data_url", "parse_data_url"]

_URLSAFE: Final = str.maketrans("-_", "+/")
_WHITESPACE: Final = " \t\r\n\f\v"
_SHOWN_MIME: Final = re.compile(r"^[\w.+-]{1,40}/[\w.+-]{1,40}$")


@dataclass(frozen=True, slots=True)
class DataUrl:
    mime: str
    """The declared MIME type, lower-cased, without parameters (``image/png``)."""
    data: bytes
    """The decoded bytes."""
    canonical: bool
    """The URL was exactly ``build_data_url(mime, data)`` (standard padded base64, no whitespace, no
    other parameters)."""


def is_data_url(url: str) -> bool:
    """Whether ``url`` is a ``data:`` URL (case-insensitive, surrounding whitespace ignored, as the
    providers read it)."""
    return url.lstrip()[:5].lower() == "data:"


def parse_data_url(url: str) -> DataUrl:
    """The MIME type and bytes of an image ``data:`` URL; :class:`ImageDataError` when it is not one."""
    s = url.strip()
    if s[:5].lower() != "data:":
        raise ImageDataError("not a data: URL")
    comma = s.find(",")
    if comma < 0:
        raise ImageDataError("the data: URL has no `,` before its data")
    header = s[5:comma]
    declared, *params = header.split(";")
    mime = declared.strip().lower()
    if not mime.startswith("image/") or len(mime) <= len("image/"):
        shown = f"`{declared.strip()}`" if _SHOWN_MIME.match(declared.strip()) else "none"
        raise ImageDataError(f"the data: URL has no image MIME type (got {shown})")
    if not any(p.strip().lower() == "base64" for p in params):
        raise ImageDataError("the data: URL is not base64-encoded (`;base64,` is missing)")
    payload = s[comma + 1 :]
    data = decode_base64(payload)
    canonical = len(s) == len(url) and header == f"{mime};base64" and _is_canonical_base64(payload)
    return DataUrl(mime=mime, data=data, canonical=canonical)


def decode_base64(payload: str) -> bytes:
    """Standard or URL-safe base64, whitespace and missing padding tolerated; anything else is an
    :class:`ImageDataError`. Empty data is one too."""
    compact = payload
    if not compact.isascii():
        raise ImageDataError("the image data is not valid base64")
    if any(c in compact for c in _WHITESPACE):
        compact = "".join(compact.split())
    if "-" in compact or "_" in compact:
        compact = compact.translate(_URLSAFE)
    compact = compact.rstrip("=")
    if not compact:
        raise ImageDataError("the image data is empty")
    if len(compact) % 4 == 1:
        raise ImageDataError("the image data is not valid base64 (truncated)")
    try:
        return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ImageDataError("the image data is not valid base64") from None


def _is_canonical_base64(payload: str) -> bool:
    if "-" in payload or "_" in payload or any(c in payload for c in _WHITESPACE):
        return False
    return len(payload) % 4 == 0


def build_data_url(mime: str, data: bytes) -> str:
    """``data:<mime>;base64,<standard padded base64>``: the form every provider reads back."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
