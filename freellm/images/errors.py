"""The one error of the image package: image data that cannot be used (the stage makes it a 400)."""

from __future__ import annotations

__all__ = ["ImageDataError"]


class ImageDataError(ValueError):
    """Image data that does not decode, or that would cost too much to decode.

    ``reason`` is a short client-facing phrase (no bytes of the image in it); the image stage prefixes
    it with the image's place in the request (``messages[0].content[1]``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
