"""Over the wire: image shrink on every surface, with the official SDKs, against a real gateway in front
of the simulator — what the upstream receives, what an undecodable image costs the client (a 400 in
its own wire's envelope, before any upstream call), and the request log's ``image_bytes``."""

from __future__ import annotations

import base64
import functools
import io
import random
from typing import Any

import anthropic
import httpx2 as httpx
import openai
import pytest
from google import genai
from google.genai import types
from PIL import Image

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import MODEL, MakeGateway, anthropic_sdk, received, sdk

# ---- images ------------------------------------------------------------------------------------------


def encode(im: Image.Image, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


@functools.cache
def big_png() -> bytes:
    """4000x3000, photo-like: a few MB as PNG, a few hundred KB as a 2048 px JPEG."""
    small = Image.frombytes("RGB", (20, 15), random.Random(1).randbytes(20 * 15 * 3))
    return encode(small.resize((4000, 3000), Image.Resampling.BILINEAR), "PNG", compress_level=1)


@functools.cache
def small_noisy_png() -> bytes:
    return encode(Image.frombytes("RGB", (200, 150), random.Random(2).randbytes(200 * 150 * 3)), "PNG")


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


TRUNCATED_PNG = big_png()[:5000]


def upstream_images(body: dict[str, Any]) -> list[str]:
    """The image URLs of an OpenAI-wire body the simulator received, in order."""
    return [
        p["image_url"]["url"]
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p.get("type") == "image_url"
    ]


def decoded(url: str) -> tuple[str, bytes, Image.Image]:
    header, payload = url.split(",", 1)
    raw = base64.b64decode(payload, validate=True)
    return header, raw, Image.open(io.BytesIO(raw))


def vision_gateway(make_gateway: MakeGateway, **kwargs: Any) -> tuple[GatewayServer, str]:
    a = unique("alpha")
    gw = make_gateway({a: [MODEL]}, model_options={f"{a}/{MODEL}": {"vision": True}}, **kwargs)
    return gw, a


def image_bytes_logged(gw: GatewayServer) -> Any:
    [row] = gw.run(gw.state.store.recent_requests(5))
    return row.extra.get("image_bytes")


# ---- OpenAI chat ---------------------------------------------------------------------------------------


def test_big_png_reaches_the_upstream_as_a_jpeg(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = vision_gateway(make_gateway)
    png = big_png()
    reply = sdk(gw, timeout=60).chat.completions.create(
        model="auto",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": data_url("image/png", png), "detail": "low"}},
                ],
            }
        ],
    )
    assert reply.choices[0].message.content
    [body] = received(sim_control, a)
    [url] = upstream_images(body)
    header, raw, im = decoded(url)
    assert header == "data:image/jpeg;base64"
    assert im.format == "JPEG" and im.size == (2048, 1536) and max(im.size) <= 2048
    part = body["messages"][0]["content"][1]
    assert part["image_url"]["detail"] == "low"
    assert image_bytes_logged(gw) == [len(png), len(raw)]


def test_small_jpeg_and_http_urls_are_forwarded_untouched(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = vision_gateway(make_gateway)
    jpeg = encode(Image.new("RGB", (64, 48), (1, 2, 3)), "JPEG")
    urls = [data_url("image/jpeg", jpeg), "https://example.com/cat.png", "http://example.com/dog.jpg"]
    sdk(gw).chat.completions.create(
        model="auto",
        messages=[
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}} for u in urls]}
        ],
    )
    [body] = received(sim_control, a)
    assert upstream_images(body) == urls
    assert image_bytes_logged(gw) == [len(jpeg), len(jpeg)]


def test_only_http_urls_log_no_image_bytes(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = vision_gateway(make_gateway)
    sdk(gw).chat.completions.create(
        model="auto",
        messages=[
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}],
            }
        ],
    )
    [body] = received(sim_control, a)
    assert upstream_images(body) == ["https://example.com/a.png"]
    assert image_bytes_logged(gw) is None


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,not*base64!",
        data_url("image/png", b"this is not an image at all"),
        data_url("image/png", TRUNCATED_PNG),
        data_url("text/plain", b"hello"),
        "data:image/png,%89PNG",
    ],
    ids=["bad-base64", "not-an-image", "truncated", "text-mime", "not-base64"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_undecodable_image_is_a_400_before_any_upstream_call(
    make_gateway: MakeGateway, sim_control: SimControl, url: str, stream: bool
) -> None:
    gw, a = vision_gateway(make_gateway)
    with pytest.raises(openai.BadRequestError) as info:
        sdk(gw).chat.completions.create(
            model="auto",
            stream=stream,
            messages=[
                {"role": "system", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                },
            ],
        )
    assert info.value.status_code == 400
    err = info.value.body
    assert isinstance(err, dict)
    assert err["type"] == "invalid_request_error" and err["param"] == "messages[1].content[1]"
    assert err["message"].startswith("messages[1].content[1]: ")
    assert received(sim_control, a) == []


def test_shrink_off_forwards_the_original_but_still_validates(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = vision_gateway(make_gateway, extra={"images": {"shrink": False}})
    url = data_url("image/png", small_noisy_png())
    sdk(gw).chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}],
    )
    [body] = received(sim_control, a)
    assert upstream_images(body) == [url]
    assert image_bytes_logged(gw) == [len(small_noisy_png())] * 2
    with pytest.raises(openai.BadRequestError) as info:
        sdk(gw).chat.completions.create(
            model="auto",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": data_url("image/png", TRUNCATED_PNG)}}
                    ],
                }
            ],
        )
    assert info.value.status_code == 400 and "truncated" in str(info.value.body)
    assert len(received(sim_control, a)) == 1


# ---- Anthropic Messages -----------------------------------------------------------------------------------


def anthropic_image(media_type: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def test_anthropic_surface_shrinks_too(make_gateway: MakeGateway, sim_control: SimControl) -> None:
    gw, a = vision_gateway(make_gateway)
    png = big_png()
    content = [anthropic_image("image/png", base64.b64encode(png).decode()), {"type": "text", "text": "?"}]
    messages: Any = [{"role": "user", "content": content}]
    msg = anthropic_sdk(gw, timeout=60).messages.create(model=MODEL, max_tokens=50, messages=messages)
    assert msg.content
    [body] = received(sim_control, a)
    [url] = upstream_images(body)
    header, _raw, im = decoded(url)
    assert header == "data:image/jpeg;base64" and im.size == (2048, 1536)


def test_anthropic_surface_undecodable_image_is_a_400_in_its_envelope(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = vision_gateway(make_gateway)
    messages: Any = [
        {"role": "user", "content": [anthropic_image("image/png", "AAAA"), {"type": "text", "text": "?"}]}
    ]
    with pytest.raises(anthropic.BadRequestError) as info:
        anthropic_sdk(gw).messages.create(model=MODEL, max_tokens=50, messages=messages)
    assert info.value.status_code == 400
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "messages[0].content[0]" in body["error"]["message"]
    assert received(sim_control, a) == []


# ---- Gemini ------------------------------------------------------------------------------------------------


def test_gemini_sdk_image_reaches_the_upstream_reencoded(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    # google-genai sends inlineData in URL-safe base64: it must decode, and reach an OpenAI upstream as a
    # standard base64 JPEG data URL.
    gw, a = vision_gateway(make_gateway)
    client = genai.Client(
        api_key=CLIENT_KEY,
        http_options=types.HttpOptions(base_url=gw.base_url, api_version="v1beta", timeout=30_000),
    )
    png = small_noisy_png()
    contents: Any = [types.Part.from_bytes(data=png, mime_type="image/png"), "What is this?"]
    reply = client.models.generate_content(model="gemini-2.5-flash", contents=contents)
    assert reply.text
    [body] = received(sim_control, a)
    [url] = upstream_images(body)
    header, raw, im = decoded(url)
    assert header == "data:image/jpeg;base64" and im.size == (200, 150)
    assert image_bytes_logged(gw) == [len(png), len(raw)]


def test_gemini_bad_inline_data_is_a_400_in_its_envelope(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a = vision_gateway(make_gateway)
    payload = {
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "look"},
                    {
                        "inlineData": {
                            "mimeType": "image/png",
                            "data": base64.b64encode(TRUNCATED_PNG).decode(),
                        }
                    },
                ],
            }
        ]
    }
    with httpx.Client(timeout=15.0) as h:
        resp = h.post(
            f"{gw.base_url}/v1beta/models/x:generateContent",
            json=payload,
            headers={"x-goog-api-key": CLIENT_KEY},
        )
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT"
    assert "truncated" in err["message"] and "messages[0].content[1]" in err["message"]
    assert received(sim_control, a) == []


def test_the_stage_is_always_listed_before_the_gates(make_gateway: MakeGateway) -> None:
    for extra in ({}, {"images": {"shrink": False}}, {"compression": {"mode": "standard"}}):
        gw, _ = vision_gateway(make_gateway, extra=extra)
        names = gw.state.engine.pipeline.names
        assert "images" in names and names.index("images") < names.index("gates")
        if "compression" in extra:
            assert names.index("compress") < names.index("images")
