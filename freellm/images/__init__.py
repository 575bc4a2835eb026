"""Image handling for the pre-routing pipeline (docs/images.md): ``data:`` URL parsing and the pure
validate-and-shrink function the image stage runs off the event loop.

Pillow is imported lazily, inside :func:`~freellm.images.shrink.shrink_image`, so a gateway that never
sees an image never imports it.
"""

from __future__ import annotations

from freellm.images.data_url import DataUrl, build_data_url, is_data_url, parse_data_url
from freellm.images.errors import ImageDataError
from freellm.images.shrink import (
    MAX_REQUEST_PIXELS,
    PixelLimitError,
    ShrinkParams,
    ShrinkResult,
    pixel_limit,
    shrink_image,
)

__all__ = [
    "MAX_REQUEST_PIXELS",
    "DataUrl",
    "ImageDataError",
    "PixelLimitError",
    "ShrinkParams",
    "ShrinkResult",
    "build_data_url",
    "is_data_url",
    "parse_data_url",
    "pixel_limit",
    "shrink_image",
]
