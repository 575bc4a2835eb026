"""Validate and shrink one image: bytes in, bytes out (spec/core.md §9 "Image shrink").

:func:`shrink_image` decodes the image fully (so a truncated file or garbage is caught here, not by an
upstream), and — when shrinking is on and the image is ≥ ``max_bytes``, not JPEG/WebP, or larger than
``max_px`` on a side — fits it within ``max_px``x``max_px`` (aspect kept, EXIF orientation applied) and
re-encodes it: JPEG at ``jpeg_quality``, or PNG when it has *real* transparency (some pixel's alpha below
255, palette and colour-key transparency included). The original is kept when the result is not
smaller, or when encoding fails (the image did decode: fail open).

Pure and thread-safe: no shared mutable state, so the image stage runs it in a worker thread. Pillow is
imported on the first call, never at module import.

Decompression bombs: an image whose header announces more than ``max_pixels`` pixels (default: Pillow's
``Image.MAX_IMAGE_PIXELS``, ~89.5 M) is refused before any pixel is decoded; Pillow's own
``DecompressionBombError`` (over twice its limit) is refused the same way. Only the formats in
:data:`FORMATS` are tried, so no exotic plugin (EPS through Ghostscript, PSD…) ever sees client bytes.
A large JPEG is decoded at a reduced DCT scale (``draft``) when it is going to be downsized anyway.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from freellm.images.errors import ImageDataError

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = [
    "FORMATS",
    "MAX_REQUEST_PIXELS",
    "PixelLimitError",
    "ShrinkParams",
    "ShrinkResult",
    "pixel_limit",
    "shrink_image",
]

FORMATS: Final = ("JPEG", "MPO", "PNG", "GIF", "WEBP", "BMP", "TIFF", "AVIF")
"""The Pillow formats an inbound image may be (those this Pillow build has); anything else is a 400."""
KEPT_FORMATS: Final = frozenset({"JPEG", "MPO", "WEBP"})
"""Formats kept as they are when small enough (MPO: a camera JPEG with a second picture appended)."""
MAX_REQUEST_PIXELS: Final = 256_000_000
"""Decoded pixels one request's images may cost in total (the image stage's budget)."""
_FALLBACK_MAX_PIXELS: Final = 89_478_485
"""Pillow's default ``MAX_IMAGE_PIXELS``, used when the process turned Pillow's check off."""
_MIME: Final = {
    "JPEG": "image/jpeg",
    "MPO": "image/jpeg",
    "PNG": "image/png",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
    "AVIF": "image/avif",
}
_ORIENTATION: Final = 0x0112
_SWAPPING_ORIENTATIONS: Final = frozenset({5, 6, 7, 8})
_ALPHA_MODES: Final = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})


@dataclass(frozen=True, slots=True)
class ShrinkParams:
    shrink: bool = True
    """False: validate only (the image always comes back unchanged)."""
    max_px: int = 2048
    max_bytes: int = 1_048_576
    jpeg_quality: int = 90
    max_pixels: int | None = None
    """Refuse an image with more pixels than this before decoding it; None: Pillow's limit."""


@dataclass(frozen=True, slots=True)
class ShrinkResult:
    data: bytes
    """The image to send: the input itself when :attr:`changed` is false."""
    mime: str
    """What :attr:`data` is (``image/jpeg`` after a JPEG re-encode), from its bytes, not a declaration."""
    changed: bool
    source_format: str
    """Pillow's name for what the input was (``PNG``, ``JPEG``, ``MPO``…)."""
    source_size: tuple[int, int]
    size: tuple[int, int]
    """Pixel size of :attr:`data` (after EXIF orientation when re-encoded)."""

    @property
    def pixels(self) -> int:
        """Pixels the input announced: the work its decode cost."""
        return self.source_size[0] * self.source_size[1]


class PixelLimitError(ImageDataError):
    """The image announces more pixels than may be decoded (``pixels`` > ``limit``)."""

    def __init__(self, reason: str, *, pixels: int, limit: int) -> None:
        super().__init__(reason)
        self.pixels = pixels
        self.limit = limit


_DEFAULT_PARAMS: Final = ShrinkParams()


def shrink_image(data: bytes, params: ShrinkParams = _DEFAULT_PARAMS) -> ShrinkResult:
    """Validate ``data`` as an image and shrink it per ``params``; :class:`ImageDataError` when it does
    not decode (garbage, an unsupported format, a truncated file) or is too large to decode."""
    from PIL import Image

    if not data:
        raise ImageDataError("the image data is empty")
    limit = params.max_pixels if params.max_pixels is not None else pixel_limit()
    try:
        img = Image.open(io.BytesIO(data), formats=_formats())
    except Image.DecompressionBombError:
        raise PixelLimitError(
            f"the image has too many pixels to decode (at most {limit} allowed)",
            pixels=limit + 1,
            limit=limit,
        ) from None
    except Exception:  # UnidentifiedImageError, or a plugin choking on a bad header
        raise ImageDataError("the data is not an image that can be decoded (JPEG, PNG, GIF, WebP…)") from None
    with img:
        fmt = img.format or "unknown"
        w, h = img.size
        if w < 1 or h < 1:
            raise ImageDataError("the image has no pixels")
        if w * h > limit:
            raise PixelLimitError(
                f"the image is too large to decode ({w}x{h} pixels; at most {limit} allowed)",
                pixels=w * h,
                limit=limit,
            )
        mime = _MIME.get(fmt) or Image.MIME.get(fmt) or "application/octet-stream"
        needs = params.shrink and (
            len(data) >= params.max_bytes or fmt not in KEPT_FORMATS or max(w, h) > params.max_px
        )
        target = _fit(w, h, params.max_px)
        if needs and fmt in ("JPEG", "MPO") and target != (w, h):
            img.draft(None, target)  # decode at 1/2, 1/4 or 1/8 scale, never below the target size
        try:
            img.load()
        except Exception as exc:
            raise ImageDataError(_decode_reason(exc)) from None
        kept = ShrinkResult(data, mime, False, fmt, (w, h), (w, h))
        if not needs:
            return kept
        try:
            out, out_mime, out_size = _reencode(img, target, params.jpeg_quality)
        except Exception:  # it decoded; a failure to re-encode is ours, not the client's
            return kept
        if len(out) >= len(data):
            return kept
        return ShrinkResult(out, out_mime, True, fmt, (w, h), out_size)


def pixel_limit() -> int:
    """The pixels one image may have: Pillow's ``Image.MAX_IMAGE_PIXELS`` (its default when the process
    turned Pillow's check off)."""
    from PIL import Image

    return Image.MAX_IMAGE_PIXELS or _FALLBACK_MAX_PIXELS


@functools.cache
def _formats() -> tuple[str, ...]:
    from PIL import Image

    Image.init()
    return tuple(f for f in FORMATS if f in Image.OPEN)


def _fit(w: int, h: int, max_px: int) -> tuple[int, int]:
    """(w, h) scaled to fit within max_pxxmax_px, aspect kept; unchanged when it already fits."""
    longest = max(w, h)
    if longest <= max_px:
        return w, h
    scale = max_px / longest
    return max(1, min(max_px, round(w * scale))), max(1, min(max_px, round(h * scale)))


def _decode_reason(exc: Exception) -> str:
    text = str(exc).lower()
    if "truncated" in text or isinstance(exc, EOFError):
        return "the image data is truncated"
    if "decompression bomb" in text or "exceeds limit" in text:
        return "the image has too many pixels to decode"
    return "the image data is corrupt and does not decode"


def _reencode(img: Image, target: tuple[int, int], quality: int) -> tuple[bytes, str, tuple[int, int]]:
    from PIL import Image as PILImage
    from PIL import ImageOps

    icc = img.info.get("icc_profile") if img.mode != "CMYK" else None
    if img.getexif().get(_ORIENTATION, 1) in _SWAPPING_ORIENTATIONS:
        target = (target[1], target[0])
    im = ImageOps.exif_transpose(img)
    alpha = _real_alpha(im)
    if alpha is not None:
        im, fmt, mime = alpha, "PNG", "image/png"
    else:
        im, fmt, mime = _opaque(im), "JPEG", "image/jpeg"
    if im.size != target:
        im = im.resize(target, PILImage.Resampling.LANCZOS, reducing_gap=3.0)
    buf = io.BytesIO()
    if fmt == "JPEG":
        im.save(buf, "JPEG", quality=quality, optimize=True, icc_profile=icc)
    else:
        im.save(buf, "PNG", icc_profile=icc)
    return buf.getvalue(), mime, im.size


def _real_alpha(im: Image) -> Image | None:
    """``im`` as RGBA/LA when some pixel is not fully opaque (an alpha channel, a palette's or a colour
    key's transparency); None when it is opaque everywhere."""
    mode = im.mode
    if mode in _ALPHA_MODES:
        rgba = im if mode in ("RGBA", "LA") else im.convert("RGBA")
    elif "transparency" in im.info:
        rgba = im.convert("RGBA")
    else:
        return None
    low, _high = rgba.getchannel("A").getextrema()
    return rgba if isinstance(low, (int, float)) and low < 255 else None


def _opaque(im: Image) -> Image:
    """``im`` in a mode JPEG stores: L for grey images, RGB for the rest (alpha, if any, all 255)."""
    mode = im.mode
    if mode in ("RGB", "L"):
        return im
    if mode in ("1", "LA", "La"):
        return im.convert("L")
    if mode.startswith("I;16") or mode in ("I", "F"):
        # 16-bit (or wider) grey: scale to 8 bits rather than clip everything above 255 to white.
        wide = im.convert("I") if mode != "I" else im
        hi = wide.getextrema()[1]
        top = float(hi) if isinstance(hi, (int, float)) else 255.0
        if top > 255:
            wide = wide.point(lambda v: v * (255.0 / top))
        return wide.convert("L")
    return im.convert("RGB")
