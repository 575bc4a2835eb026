"""Image shrink: the pure function (sizes, modes and formats of what comes out), ``data:`` URL parsing,
and the pipeline stage over canonical requests (what it rewrites, what it refuses and where, what it
never touches)."""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import random
import struct
import subprocess
import sys
import threading
import zlib
from typing import Any

import pytest
from PIL import Image

from freellm.config import ImagesConfig
from freellm.core.request import ChatRequest, parse_chat_request
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft
from freellm.engine.pipeline import images as image_stage
from freellm.engine.pipeline.images import ImageStage
from freellm.errors import ClientError
from freellm.images import (
    ImageDataError,
    PixelLimitError,
    ShrinkParams,
    ShrinkResult,
    build_data_url,
    is_data_url,
    parse_data_url,
    shrink_image,
)

# ---- fixtures: images made on the spot (deterministic), encoded once --------------------------------


def encode(im: Image.Image, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def photo(w: int, h: int, *, seed: int = 1, grain: int = 20) -> Image.Image:
    """A smooth, photo-like RGB image: random colours upscaled (PNG keeps it big, JPEG does not)."""
    gw, gh = max(2, w // 200), max(2, h // 200)
    small = Image.frombytes("RGB", (gw, gh), random.Random(seed).randbytes(gw * gh * 3))
    return small.resize((w, h), Image.Resampling.BILINEAR) if grain else small


def noise(w: int, h: int, mode: str = "RGB", *, seed: int = 2) -> Image.Image:
    bands = len(mode)
    return Image.frombytes(mode, (w, h), random.Random(seed).randbytes(w * h * bands))


def palette(w: int, h: int, colours: int = 64, *, seed: int = 3) -> Image.Image:
    """A noisy palette image using indexes 0..colours-2 (the last one is left unused)."""
    rnd = random.Random(seed)
    im = Image.frombytes("P", (w, h), bytes(b % (colours - 1) for b in rnd.randbytes(w * h)))
    im.putpalette(rnd.randbytes(colours * 3))
    return im


def size_of(data: bytes) -> tuple[str, tuple[int, int], str]:
    with Image.open(io.BytesIO(data)) as im:
        return im.format or "", im.size, im.mode


@functools.cache
def big_png() -> bytes:
    return encode(photo(4000, 3000), "PNG", compress_level=1)


def shrink(data: bytes, **kw: Any) -> ShrinkResult:
    return shrink_image(data, ShrinkParams(**kw))


# ---- the pure function -------------------------------------------------------------------------------


def test_big_png_becomes_a_jpeg_within_max_px() -> None:
    data = big_png()
    r = shrink(data)
    assert r.changed and r.mime == "image/jpeg"
    assert r.source_format == "PNG" and r.source_size == (4000, 3000)
    assert size_of(r.data) == ("JPEG", (2048, 1536), "RGB")
    assert r.size == (2048, 1536)
    assert len(r.data) < len(data)


def test_small_jpeg_is_untouched() -> None:
    data = encode(photo(640, 480), "JPEG", quality=80)
    r = shrink(data)
    assert not r.changed and r.data is data and r.mime == "image/jpeg" and r.size == (640, 480)


def test_small_png_without_alpha_becomes_a_jpeg_when_smaller() -> None:
    data = encode(noise(300, 300), "PNG")
    r = shrink(data)
    assert r.changed and r.mime == "image/jpeg" and size_of(r.data) == ("JPEG", (300, 300), "RGB")


def test_small_png_is_kept_when_a_jpeg_would_be_larger() -> None:
    data = encode(Image.new("RGB", (64, 64), (10, 20, 30)), "PNG")
    r = shrink(data)
    assert not r.changed and r.data is data and r.mime == "image/png"


def test_grey_png_becomes_a_grey_jpeg() -> None:
    r = shrink(encode(noise(300, 300, "L"), "PNG"))
    assert r.changed and size_of(r.data) == ("JPEG", (300, 300), "L")


def test_png_with_real_alpha_stays_png() -> None:
    im = photo(3000, 2000).convert("RGBA")
    im.putalpha(Image.linear_gradient("L").resize((3000, 2000)))
    r = shrink(encode(im, "PNG", compress_level=1))
    assert r.changed and r.mime == "image/png"
    assert size_of(r.data) == ("PNG", (2048, 1365), "RGBA")


def test_rgba_png_that_is_opaque_everywhere_becomes_a_jpeg() -> None:
    r = shrink(encode(photo(3000, 2000).convert("RGBA"), "PNG", compress_level=1))
    assert r.changed and size_of(r.data) == ("JPEG", (2048, 1365), "RGB")


def test_one_transparent_pixel_is_real_transparency() -> None:
    im = noise(1200, 900).convert("RGBA")
    im.putpixel((5, 5), (0, 0, 0, 254))
    r = shrink(encode(im, "PNG", compress_level=1))
    assert r.changed and size_of(r.data)[0] == "PNG"


def test_palette_transparency_counts() -> None:
    data = encode(palette(1200, 1200), "PNG", transparency=0)
    r = shrink(data)  # a palette is compact: an RGBA PNG of 2048 px would be larger, so it is kept
    assert not r.changed and r.data is data
    r = shrink(data, max_px=512)
    assert r.changed and size_of(r.data) == ("PNG", (512, 512), "RGBA")


def test_palette_transparency_no_pixel_uses_is_opaque() -> None:
    unused = 63  # the transparent index, which no pixel uses
    r = shrink(encode(palette(1200, 1200), "PNG", transparency=unused), max_px=512)
    assert r.changed and size_of(r.data) == ("JPEG", (512, 512), "RGB")


def test_small_webp_is_untouched() -> None:
    data = encode(photo(400, 300), "WEBP", quality=80)
    r = shrink(data)
    assert not r.changed and r.data is data and r.mime == "image/webp"


def test_big_webp_is_fitted() -> None:
    r = shrink(encode(noise(3000, 1000), "WEBP", quality=80))
    assert r.changed and size_of(r.data) == ("JPEG", (2048, 683), "RGB")


def test_gif_becomes_a_jpeg() -> None:
    data = encode(palette(600, 400), "GIF")
    r = shrink(data)
    assert r.source_format == "GIF" and r.changed and size_of(r.data) == ("JPEG", (600, 400), "RGB")


def test_gif_with_transparency_becomes_a_png() -> None:
    r = shrink(encode(palette(1200, 600), "GIF", transparency=0), max_px=600)
    assert r.changed and size_of(r.data) == ("PNG", (600, 300), "RGBA")


def test_huge_bytes_within_max_px_are_reencoded() -> None:
    data = encode(noise(1500, 1500), "PNG", compress_level=1)
    assert len(data) > 1_048_576
    r = shrink(data)
    assert r.changed and size_of(r.data) == ("JPEG", (1500, 1500), "RGB") and len(r.data) < len(data)


def test_large_jpeg_within_max_px_is_reencoded_only_when_smaller() -> None:
    heavy = encode(noise(1200, 1200), "JPEG", quality=100)
    assert len(heavy) > 1_048_576
    r = shrink(heavy)
    assert r.changed and len(r.data) < len(heavy) and size_of(r.data)[1] == (1200, 1200)
    light = encode(noise(1200, 1200), "JPEG", quality=30)
    r = shrink(light, max_bytes=1000)  # over the byte limit, but q90 would be larger: kept
    assert not r.changed and r.data is light


def test_result_not_smaller_keeps_the_original() -> None:
    data = encode(Image.linear_gradient("L").resize((3000, 3000)), "PNG")  # 16 KB: any JPEG is larger
    r = shrink(data)
    assert not r.changed and r.data is data and r.size == (3000, 3000)


def test_big_jpeg_is_decoded_at_reduced_scale_and_fitted() -> None:
    r = shrink(encode(photo(8000, 6000), "JPEG", quality=85))
    assert r.changed and size_of(r.data) == ("JPEG", (2048, 1536), "RGB")


def test_exif_orientation_is_applied_when_reencoding() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    data = encode(photo(3000, 2000), "JPEG", quality=95, exif=exif.tobytes())
    r = shrink(data)
    assert r.changed and size_of(r.data)[1] == (1365, 2048)


def test_cmyk_jpeg_is_reencoded_as_rgb() -> None:
    r = shrink(encode(photo(3000, 2000).convert("CMYK"), "JPEG"))
    assert r.changed and size_of(r.data) == ("JPEG", (2048, 1365), "RGB")


def test_16_bit_grey_is_scaled_not_clipped() -> None:
    im = noise(400, 400, "L").convert("I").point(lambda v: v * 256)
    r = shrink(encode(im.convert("I;16"), "PNG"))
    assert r.changed
    with Image.open(io.BytesIO(r.data)) as out:
        assert out.mode == "L"
        low, high = out.getextrema()
        assert isinstance(low, int) and isinstance(high, int) and high - low > 200


def test_bmp_and_tiff_are_reencoded() -> None:
    for fmt in ("BMP", "TIFF"):
        r = shrink(encode(photo(800, 600), fmt))
        assert r.source_format == fmt and r.changed and size_of(r.data)[0] == "JPEG"


def test_custom_limits() -> None:
    r = shrink(encode(photo(1000, 500), "JPEG"), max_px=100, jpeg_quality=50)
    assert r.changed and size_of(r.data)[1] == (100, 50)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty"),
        (b"hello, not an image", "not an image"),
        (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n", "not an image"),
        (b"P6\n2 2\n255\n" + bytes(12), "not an image"),  # PPM: Pillow reads it, the gateway does not
    ],
)
def test_what_is_not_an_accepted_image(data: bytes, reason: str) -> None:
    with pytest.raises(ImageDataError, match=reason):
        shrink(data)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF"])
def test_truncated_image_is_refused(fmt: str) -> None:
    data = encode(noise(300, 300).quantize(64) if fmt == "GIF" else noise(300, 300), fmt)
    with pytest.raises(ImageDataError, match="truncated"):
        shrink(data[: len(data) // 2])
    with pytest.raises(ImageDataError, match="truncated"):
        shrink(data[: len(data) // 2], shrink=False)


def test_corrupt_pixel_data_is_refused() -> None:
    data = bytearray(encode(noise(200, 200), "PNG"))
    data[200:260] = bytes(60)  # inside the IDAT chunk: the CRC and the deflate stream break
    with pytest.raises(ImageDataError):
        shrink(bytes(data))


def _png_header_only(w: int, h: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 16))
        + chunk(b"IEND", b"")
    )


def test_decompression_bomb_is_refused_before_decoding() -> None:
    with pytest.raises(PixelLimitError, match="too many pixels"):
        shrink(_png_header_only(100_000, 100_000))  # over twice Pillow's limit: its own error
    with pytest.raises(PixelLimitError, match="too large to decode"):
        shrink(_png_header_only(4000, 4000), max_pixels=1_000_000)
    with pytest.raises(PixelLimitError), pytest.warns(Image.DecompressionBombWarning):
        shrink(_png_header_only(10_000, 10_000))  # between Pillow's warning and its error: ours


def test_shrink_off_validates_only() -> None:
    data = big_png()
    r = shrink(data, shrink=False)
    assert not r.changed and r.data is data and r.mime == "image/png" and r.size == (4000, 3000)
    with pytest.raises(ImageDataError):
        shrink(b"GIF89a garbage", shrink=False)


def test_thread_safe_in_parallel() -> None:
    inputs = [encode(noise(900 + i, 700, seed=i), "PNG", compress_level=1) for i in range(6)]
    expected = [shrink(d).data for d in inputs]
    results: dict[int, bytes] = {}

    def work(i: int) -> None:
        results[i] = shrink(inputs[i]).data

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(6)] == expected


def test_pillow_is_imported_lazily() -> None:
    code = (
        "import sys, asyncio\n"
        "import freellm.images, freellm.engine.pipeline.images as m\n"
        "from freellm.config import ImagesConfig\n"
        "from freellm.core.request import parse_chat_request\n"
        "from freellm.engine.context import RequestContext\n"
        "from freellm.engine.pipeline import Draft\n"
        "req = parse_chat_request({'messages': [{'role': 'user', 'content': [{'type': 'text', 'text': 'x'},"
        " {'type': 'image_url', 'image_url': {'url': 'https://example.com/a.png'}}]}]})\n"
        "ctx = RequestContext(request_id='r', surface='chat', started=0.0, started_wall=0.0)\n"
        "asyncio.run(m.ImageStage(ImagesConfig())(ctx, Draft(req)))\n"
        "assert 'PIL' not in sys.modules, 'Pillow imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- data: URLs --------------------------------------------------------------------------------------


def test_data_url_round_trip_and_leniency() -> None:
    raw = bytes(range(256)) * 3 + b"!"
    url = build_data_url("image/png", raw)
    p = parse_data_url(url)
    assert p.mime == "image/png" and p.data == raw and p.canonical
    std = base64.b64encode(raw).decode()
    wrapped = "\n".join(std[i : i + 76] for i in range(0, len(std), 76))
    for variant in (
        f"data:image/png;base64,{base64.urlsafe_b64encode(raw).decode()}",  # google-genai's alphabet
        f"data:image/png;base64,{wrapped}",
        f"data:image/png;base64,{std.rstrip('=')}",
        f"  DATA:Image/PNG;charset=x;BASE64,{std}",
    ):
        p = parse_data_url(variant)
        assert p.data == raw and p.mime == "image/png" and not p.canonical
    assert is_data_url(" Data:image/png;base64,xx") and not is_data_url("https://x/data:")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("data:image/png;base64,!!!!", "not valid base64"),
        ("data:image/png;base64,QUJDRA=x", "not valid base64"),
        ("data:image/png;base64,QUJDR", "not valid base64"),
        ("data:image/png;base64,ünï", "not valid base64"),
        ("data:image/png;base64,", "empty"),
        ("data:image/png,%89PNG", "not base64"),
        ("data:text/plain;base64,aGVsbG8=", "no image MIME type (got `text/plain`)"),
        ("data:;base64,aGVsbG8=", "no image MIME type (got none)"),
        ("data:image/;base64,aGVsbG8=", "no image MIME type"),
        ("data:image/png;base64", "no `,`"),
    ],
)
def test_bad_data_urls(url: str, reason: str) -> None:
    with pytest.raises(ImageDataError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_data_url(url)


# ---- the stage ---------------------------------------------------------------------------------------


def ctx() -> RequestContext:
    return RequestContext(request_id="r", surface="chat", started=0.0, started_wall=0.0)


def chat(*contents: Any, **fields: Any) -> ChatRequest:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    messages += [{"role": "user", "content": c} for c in contents]
    return parse_chat_request({"model": "auto", "messages": messages, **fields})


def image_part(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


async def run(req: ChatRequest, c: RequestContext | None = None, **config: Any) -> Draft:
    draft = await ImageStage(ImagesConfig(**config))(c or ctx(), Draft(req))
    assert isinstance(draft, Draft)
    return draft


async def test_no_images_returns_the_draft_itself() -> None:
    c = ctx()
    d = Draft(chat("hello", [{"type": "text", "text": "hi"}]))
    assert await ImageStage(ImagesConfig())(c, d) is d
    assert c.image_bytes is None


async def test_remote_urls_are_untouched_and_not_counted() -> None:
    req = chat([{"type": "text", "text": "look"}, image_part("https://example.com/cat.png")])
    c = ctx()
    d = await run(req, c)
    assert d.req is req and c.image_bytes is None


async def test_big_png_is_rewritten_as_a_jpeg_data_url() -> None:
    data = big_png()
    url = build_data_url("image/png", data)
    req = chat([{"type": "text", "text": "what is this?"}, image_part(url, detail="high")])
    c = ctx()
    d = await run(req, c)
    assert d.req is not req
    content = d.req.messages[1].content
    assert isinstance(content, list)
    part = content[1]
    assert part["image_url"]["detail"] == "high"
    new_url = part["image_url"]["url"]
    assert new_url.startswith("data:image/jpeg;base64,")
    jpeg = parse_data_url(new_url).data
    assert size_of(jpeg) == ("JPEG", (2048, 1536), "RGB")
    assert c.image_bytes == (len(data), len(jpeg))
    assert req.messages[1].content[1]["image_url"]["url"] == url  # type: ignore[index]  # never mutated
    assert d.req.messages[0] is req.messages[0]
    assert d.req.has_images and d.req.image_count == 1


async def test_every_part_shape_is_handled() -> None:
    png = encode(noise(300, 300), "PNG")
    url = build_data_url("image/png", png)
    req = chat(
        [
            {"type": "image", "image_url": url},
            {"type": "image", "url": url},
            {"type": "image", "image": {"url": url}},
        ]
    )
    d = await run(req)
    content = d.req.messages[1].content
    assert isinstance(content, list)
    assert content[0]["image_url"].startswith("data:image/jpeg;base64,")
    assert content[1]["url"].startswith("data:image/jpeg;base64,")
    assert content[2]["image"]["url"].startswith("data:image/jpeg;base64,")


async def test_undecodable_image_names_its_place() -> None:
    good = build_data_url("image/jpeg", encode(photo(64, 64), "JPEG"))
    req = chat(
        "first", [{"type": "text", "text": "x"}, image_part(good), image_part("data:image/png;base64,AAAA")]
    )
    with pytest.raises(ClientError) as info:
        await run(req)
    err = info.value
    assert err.status == 400 and err.type == "invalid_request_error"
    assert err.param == "messages[2].content[2]"
    assert err.message.startswith("messages[2].content[2]: ")
    assert err.code == "invalid_image"


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,@@@@",
        "data:text/plain;base64,aGVsbG8=",
        "data:image/png,rawbytes",
        build_data_url("image/png", encode(noise(100, 100), "PNG")[:300]),
    ],
)
@pytest.mark.parametrize("shrink_on", [True, False])
async def test_bad_data_is_a_400_whether_or_not_shrinking(url: str, shrink_on: bool) -> None:
    with pytest.raises(ClientError) as info:
        await run(chat([image_part(url)]), shrink=shrink_on)
    assert info.value.status == 400 and info.value.param == "messages[1].content[0]"


async def test_shrink_off_forwards_the_original() -> None:
    data = big_png()
    url = build_data_url("image/png", data)
    req = chat([image_part(url)])
    c = ctx()
    d = await run(req, c, shrink=False)
    assert d.req is req and c.image_bytes == (len(data), len(data))


async def test_kept_image_is_made_canonical_only_when_shrinking() -> None:
    jpeg = encode(photo(64, 64), "JPEG")
    urlsafe = f"data:image/jpeg;base64,{base64.urlsafe_b64encode(jpeg).decode()}"
    mislabelled = build_data_url("image/png", jpeg)
    req = chat([image_part(urlsafe), image_part(mislabelled), image_part(build_data_url("image/jpeg", jpeg))])
    d = await run(req)
    content = d.req.messages[1].content
    assert isinstance(content, list)
    assert [p["image_url"]["url"] for p in content] == [build_data_url("image/jpeg", jpeg)] * 3
    assert content[2] is req.messages[1].content[2]  # type: ignore[index]
    off = await run(req, shrink=False)
    assert off.req is req


async def test_pixel_budget_is_shared_by_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_stage, "MAX_REQUEST_PIXELS", 500_000)
    url = build_data_url("image/jpeg", encode(photo(400, 400), "JPEG"))  # 160 000 pixels each
    await run(chat([image_part(url)] * 3))
    with pytest.raises(ClientError) as info:
        await run(chat([image_part(url)] * 4))
    assert info.value.code == "image_too_large" and info.value.param == "messages[1].content[3]"
    assert "in total" in info.value.message


async def test_one_image_over_the_pixel_limit() -> None:
    req = chat([image_part(build_data_url("image/png", _png_header_only(100_000, 100_000)))])
    with pytest.raises(ClientError) as info:
        await run(req)
    assert info.value.status == 400 and info.value.code == "image_too_large"


async def test_decoding_does_not_block_the_event_loop() -> None:
    url = build_data_url("image/png", big_png())
    req = chat([image_part(url)])
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    loop = asyncio.get_running_loop()
    started = loop.time()
    await run(req)
    elapsed = loop.time() - started
    stop.set()
    await task
    assert elapsed > 0.05 and ticks >= 5
