"""Image shrink (spec/core.md §9): every ``data:`` image is validated, and shrunk when it is large, before
anything is routed, on every surface.

A request without image parts returns at once (``req.has_images`` is the cached content count the gates
use anyway). Otherwise each ``data:`` URL in an ``image_url``/``image`` part is decoded and checked
(:func:`freellm.images.shrink_image`): image data that does not decode is a 400 naming its place
(``messages[0].content[1]``) whether or not shrinking is on, so no upstream sees it. With
``images.shrink`` on, a large or non-JPEG/WebP image is re-encoded (JPEG, or PNG with real
transparency) and its URL rebuilt with the new MIME type, which is what every provider reads back
(``image/jpeg`` base64 blocks for Anthropic, ``inlineData`` for Gemini, the URL itself for OpenAI
upstreams). http(s) URLs are never fetched or touched here.

The decoding runs in a worker thread (``asyncio.to_thread``), at most ``workers`` requests' images at a
time, so a large image never blocks the event loop; one request's images share a pixel budget
(:data:`~freellm.images.MAX_REQUEST_PIXELS`). The new request is built only when an URL changed; the
old one is never mutated. ``ctx.image_bytes`` records the decoded bytes before and after.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from freellm.config import ImagesConfig
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft
from freellm.errors import ClientError
from freellm.images import (
    MAX_REQUEST_PIXELS,
    ImageDataError,
    PixelLimitError,
    ShrinkParams,
    build_data_url,
    is_data_url,
    parse_data_url,
    pixel_limit,
    shrink_image,
)

__all__ = ["ImageStage"]

_IMAGE_KINDS = ("image_url", "image")
_REF_KEYS = ("image_url", "url", "image")
"""Where an image part keeps its URL, in the order the providers look (a string, or ``{"url": …}``)."""


@dataclass(frozen=True, slots=True)
class _Found:
    """One ``data:`` image of the request and where it sits."""

    message: int
    part: int
    key: str
    nested: bool
    """The URL is ``part[key]["url"]`` (else ``part[key]`` itself)."""
    url: str

    @property
    def place(self) -> str:
        return f"messages[{self.message}].content[{self.part}]"


@dataclass(frozen=True, slots=True)
class _Done:
    before: int
    after: int
    url: str | None
    """The new URL, or None to keep the part as it is."""


def _default_workers() -> int:
    return max(1, min(4, (os.cpu_count() or 2) // 2))


class ImageStage:
    name = "images"

    def __init__(self, config: ImagesConfig, *, workers: int | None = None) -> None:
        self._params = ShrinkParams(
            shrink=config.shrink,
            max_px=config.max_px,
            max_bytes=config.max_bytes,
            jpeg_quality=config.jpeg_quality,
        )
        self._slots = asyncio.Semaphore(workers or _default_workers())

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft:
        req = draft.req
        if not req.has_images:
            return draft
        found = _data_images(req.messages)
        if not found:
            return draft
        async with self._slots:
            done = await asyncio.to_thread(_process, found, self._params)
        ctx.image_bytes = (sum(d.before for d in done), sum(d.after for d in done))
        changed = [(f, d.url) for f, d in zip(found, done, strict=True) if d.url is not None]
        if not changed:
            return draft
        return dataclasses.replace(draft, req=req.replace(messages=_rewrite(req.messages, changed)))


def _data_images(messages: Sequence[Any]) -> list[_Found]:
    found: list[_Found] = []
    for i, msg in enumerate(messages):
        content = msg.content
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            kind = part.get("type")
            if not (kind == "image_url" or kind == "image"):  # equality: a garbage type may be unhashable
                continue
            located = _locate(part)
            if located is not None and is_data_url(located[2]):
                key, nested, url = located
                found.append(_Found(i, j, key, nested, url))
    return found


def _locate(part: Mapping[str, Any]) -> tuple[str, bool, str] | None:
    for key in _REF_KEYS:
        ref = part.get(key)
        if ref is None:
            continue
        if isinstance(ref, str):
            return key, False, ref
        if isinstance(ref, Mapping):
            url = ref.get("url")
            if isinstance(url, str):
                return key, True, url
        return None
    return None


def _process(found: list[_Found], params: ShrinkParams) -> list[_Done]:
    """Worker thread: every image in order, sharing one pixel budget; the first bad one is a 400."""
    per_image = pixel_limit()
    remaining = MAX_REQUEST_PIXELS
    done: list[_Done] = []
    for f in found:
        limit = min(per_image, remaining)
        try:
            parsed = parse_data_url(f.url)
            result = shrink_image(parsed.data, dataclasses.replace(params, max_pixels=limit))
        except PixelLimitError as exc:
            if limit < per_image:
                raise _refusal(
                    f, "the request's images have too many pixels in total to decode", "image_too_large"
                ) from None
            raise _refusal(f, exc.reason, "image_too_large") from None
        except ImageDataError as exc:
            raise _refusal(f, exc.reason, "invalid_image") from None
        remaining -= result.pixels
        url: str | None = None
        if result.changed:
            url = build_data_url(result.mime, result.data)
        elif params.shrink and (not parsed.canonical or parsed.mime != result.mime):
            # Kept, but say what the bytes are, in the form every provider reads (a PNG declared as
            # image/jpeg is refused by Anthropic; URL-safe base64 by OpenAI-compatible servers).
            url = build_data_url(result.mime, parsed.data)
        done.append(_Done(len(parsed.data), len(result.data), url))
    return done


def _refusal(f: _Found, reason: str, code: str) -> ClientError:
    return ClientError(400, f"{f.place}: {reason}.", code=code, param=f.place)


def _rewrite(messages: Sequence[Any], changed: list[tuple[_Found, str]]) -> list[Any]:
    out = list(messages)
    contents: dict[int, list[Any]] = {}
    for f, url in changed:
        content = contents.get(f.message)
        if content is None:
            content = contents[f.message] = list(out[f.message].content)
        part = dict(content[f.part])
        part[f.key] = {**part[f.key], "url": url} if f.nested else url
        content[f.part] = part
    for i, content in contents.items():
        out[i] = out[i].model_copy(update={"content": content})
    return out
