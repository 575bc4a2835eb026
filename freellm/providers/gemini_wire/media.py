"""Images, audio and files of a canonical request as Gemini ``inlineData`` parts.

Gemini takes media only inline (``{mimeType, data}``), so every reference must be turned into bytes
before the request is built. Decisions (also in ``docs/providers.md``):

* **images**: ``data:`` URLs → ``inlineData {mimeType, data}`` (a missing or generic MIME type is
  sniffed from the first bytes, :func:`sniff_image_type`); http(s) URLs → the bytes the provider fetched
  (``media``, keyed by URL; :func:`fetchable_urls` lists what to fetch), or dropped when the fetch failed
  or was refused; ``input_audio`` and ``file`` parts with a data URL → ``inlineData`` too. Anything else
  is dropped.

Pure: the fetching itself (with its host checks and size limits) is I/O and lives in
:mod:`freellm.providers.gemini`.
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "InlineData",
    "audio_inline",
    "data_url_inline",
    "fetchable_urls",
    "image_inline",
    "sniff_image_type",
]

InlineData = dict[str, str]
"""``{"mimeType": …, "data": <base64>}``."""

_DATA_URL: Final = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*),(.*)$", re.DOTALL)


def fetchable_urls(body: Mapping[str, Any]) -> list[str]:
    """The http(s) image URLs of a request (user and tool content), in order, without duplicates."""
    urls: list[str] = []
    for msg in body.get("messages") or ():
        if not isinstance(msg, Mapping) or msg.get("role") not in ("user", "tool"):
            continue
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            url = _image_url(part) if isinstance(part, Mapping) else None
            if url and url.startswith(("http://", "https://")) and url not in urls:
                urls.append(url)
    return urls


def _image_url(part: Mapping[str, Any]) -> str | None:
    ref = part.get("image_url")
    if ref is None:
        ref = part.get("url") or part.get("image")
    url = ref.get("url") if isinstance(ref, Mapping) else ref
    return url.strip() if isinstance(url, str) else None


def image_inline(part: Mapping[str, Any], media: Mapping[str, InlineData]) -> InlineData | None:
    """An image part as inline data: a ``data:`` URL decoded, an http(s) URL from ``media``."""
    url = _image_url(part)
    if not url:
        return None
    if url.startswith("data:"):
        return data_url_inline(url)
    fetched = media.get(url)
    return dict(fetched) if fetched is not None else None


def data_url_inline(url: str) -> InlineData | None:
    """A ``data:`` URL as inline data (MIME type sniffed when missing), or None."""
    m = _DATA_URL.match(url.strip())
    if not m:
        return None
    mime = (m.group(1) or "").strip().lower()
    params = m.group(2).lower()
    payload = m.group(3)
    if ";base64" in params:
        data = re.sub(r"\s+", "", payload)
        try:
            head = base64.b64decode(data[:24] + "=" * (-len(data[:24]) % 4), validate=False)
        except (binascii.Error, ValueError):
            return None
    else:
        raw = urllib.parse.unquote_to_bytes(payload)
        data = base64.b64encode(raw).decode()
        head = raw[:16]
    if not data:
        return None
    if not mime or mime == "application/octet-stream":
        mime = sniff_image_type(head) or "image/png"
    return {"mimeType": mime, "data": data}


def sniff_image_type(head: bytes) -> str | None:
    """The image MIME type of the first bytes of a file (PNG, JPEG, GIF, WebP, HEIC), or None."""
    if head.startswith(b"\x89PNG"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1"):
        return "image/heic"
    return None


def audio_inline(audio: Any) -> InlineData | None:
    """An ``input_audio`` object as inline data, or None."""
    if not isinstance(audio, Mapping):
        return None
    data = audio.get("data")
    fmt = audio.get("format")
    if not isinstance(data, str) or not data:
        return None
    fmt = fmt.lower() if isinstance(fmt, str) and fmt else "wav"
    mime = {"mp3": "audio/mp3", "wav": "audio/wav"}.get(fmt, f"audio/{fmt}")
    return {"mimeType": mime, "data": data}
