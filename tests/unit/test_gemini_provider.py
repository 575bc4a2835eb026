"""The Gemini upstream provider: golden request/schema/stream translation, the thought-signature cache,
error wording and classification, remote-image fetching, the provider's I/O against the simulator's
Gemini wire, and that wire itself.

Golden files live in ``tests/golden/gemini_upstream/``: ``request_*`` (a client chat request → the
Gemini body), ``schema_*`` (a JSON Schema → Gemini's subset), ``stream_*`` (Gemini response frames →
canonical chunks), ``response_*`` (a non-stream answer → chunks). Each holds its input and the reviewed
``expected`` output. After an intended change run
``FREELLM_UPDATE_GOLDEN=1 pytest tests/unit/test_gemini_provider.py`` and review the diff.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from freellm.config import ProviderConfig
from freellm.core.request import parse_chat_request
from freellm.engine.failure import FailureKind, classify, http_error_message
from freellm.errors import UpstreamError
from freellm.providers.base import Timeouts
from freellm.providers.gemini import GeminiProvider, _check_public_host, _is_public, _Refused
from freellm.providers.gemini_wire import (
    SKIP_SIGNATURE,
    GeminiStreamTranslator,
    SignatureCache,
    fetchable_urls,
    finish_reason_of,
    gemini_error_message,
    inband_error,
    is_gemma,
    needs_thought_signatures,
    response_to_chunks,
    retry_delay_of,
    sanitize_parameters,
    sanitize_schema,
    to_gemini_request,
)
from freellm.providers.registry import build_providers
from freellm.sim import SimServer
from freellm.sim.control import SimControl
from freellm.sim.gemini_wire import (
    GEMINI_JSON_STREAM_WIRE,
    GEMINI_SSE_WIRE,
    GEMINI_UNARY_WIRE,
    split_target,
    thought_signature_of,
    wire_for_action,
)
from freellm.sim.plan import FrameKind, build_plan
from freellm.sim.scenario import parse_scenario
from freellm.sim.wire import WireRequestError
from tests.unit.helpers import GOLDEN_ROOT, check_golden, golden_files, pump_chunks

GOLDEN = GOLDEN_ROOT / "gemini_upstream"
CREATED = 1_700_000_000


def _golden(prefix: str) -> list[Path]:
    return golden_files(GOLDEN, prefix)


def _cache(entries: list[list[Any]]) -> SignatureCache:
    cache = SignatureCache()
    for call_id, name, args, signature, native in entries:
        cache.remember(call_id, name, args, signature, native_id=native)
    return cache


def _translate_request(doc: dict[str, Any], *, stream: bool | None = None) -> dict[str, Any]:
    req = parse_chat_request(doc["client_request"])
    body = req.upstream_body(doc["model"], stream=doc["stream"] if stream is None else stream)
    return to_gemini_request(body, signatures=_cache(doc.get("signatures", [])), media=doc.get("media"))


# ---- golden: request translation ------------------------------------------------------------------------


@pytest.mark.parametrize("path", _golden("request"), ids=lambda p: p.stem)
def test_request_translation_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    check_golden(path, doc, _translate_request(doc))


@pytest.mark.parametrize("path", _golden("request"), ids=lambda p: p.stem)
def test_every_golden_request_is_valid_gemini(path: Path) -> None:
    """The simulator checks requests the way the Gemini API does: every translation must pass."""
    doc = json.loads(path.read_text())
    view = GEMINI_SSE_WIRE.parse_request(_translate_request(doc), {"model": doc["model"]})
    assert view.model == doc["model"] and view.stream is True


def test_request_translation_does_not_touch_the_canonical_body() -> None:
    doc = json.loads((GOLDEN / "request_tool_round_trip.json").read_text())
    req = parse_chat_request(doc["client_request"])
    body = req.upstream_body("gemini-3-flash-preview", stream=True)
    before = json.dumps(body, sort_keys=True)
    first = to_gemini_request(body, signatures=_cache(doc["signatures"]))
    second = to_gemini_request(body, signatures=_cache(doc["signatures"]))
    assert first == second
    assert json.dumps(body, sort_keys=True) == before


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"functionCallingConfig": {"mode": "AUTO"}}),
        ("none", {"functionCallingConfig": {"mode": "NONE"}}),
        ("required", {"functionCallingConfig": {"mode": "ANY"}}),
        ({"type": "function", "function": {"name": "nope"}}, {"functionCallingConfig": {"mode": "ANY"}}),
        (None, None),
    ],
)
def test_tool_choice_maps_to_function_calling_config(choice: Any, expected: Any) -> None:
    request: dict[str, Any] = {
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    if choice is not None:
        request["tool_choice"] = choice
    out = to_gemini_request(parse_chat_request(request).upstream_body("gemini-2.5-flash", stream=True))
    assert out.get("toolConfig") == expected
    assert out["tools"] == [{"functionDeclarations": [{"name": "f"}]}]


def test_sentinel_only_where_signatures_are_required() -> None:
    request = {
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "a", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "b", "function": {"name": "f", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    req = parse_chat_request(request)

    def calls(model: str) -> list[dict[str, Any]]:
        out = to_gemini_request(req.upstream_body(model, stream=True))
        return [p for c in out["contents"] for p in c["parts"] if "functionCall" in p]

    g3 = calls("gemini-3-flash-preview")
    assert [p.get("thoughtSignature") for p in g3] == [SKIP_SIGNATURE, None]
    assert all("thoughtSignature" not in p for p in calls("gemini-2.5-flash"))
    assert all("thoughtSignature" not in p for p in calls("gemma-4-31b-it"))


def test_model_families() -> None:
    assert needs_thought_signatures("gemini-3-flash-preview")
    assert needs_thought_signatures("models/gemini-3.1-pro-preview")
    assert needs_thought_signatures("gemini-10-ultra")
    assert not needs_thought_signatures("gemini-2.5-flash")
    assert not needs_thought_signatures("gemma-4-31b-it")
    assert is_gemma("gemma-4-26b-a4b-it") and not is_gemma("gemini-2.5-flash")


def test_fetchable_urls_are_http_images_of_user_and_tool_turns() -> None:
    body = {
        "messages": [
            {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://a/s.png"}}]},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://a/1.png"}},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": "http://a/2.png"},
                    {"type": "image_url", "image_url": {"url": "https://a/1.png"}},
                    {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}},
                ],
            },
            {"role": "tool", "content": [{"type": "image_url", "image_url": {"url": "https://a/3.png"}}]},
        ]
    }
    assert fetchable_urls(body) == ["https://a/1.png", "http://a/2.png", "https://a/3.png"]


# ---- golden: the schema sanitiser -----------------------------------------------------------------------


@pytest.mark.parametrize("path", _golden("schema"), ids=lambda p: p.stem)
def test_schema_sanitiser_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    before = json.dumps(doc["schema"], sort_keys=True)
    fn = sanitize_parameters if doc["mode"] == "parameters" else sanitize_schema
    actual = fn(doc["schema"])
    assert json.dumps(doc["schema"], sort_keys=True) == before  # the input is never modified
    check_golden(path, doc, actual)


@pytest.mark.parametrize("path", _golden("schema"), ids=lambda p: p.stem)
def test_every_sanitised_schema_is_accepted_by_gemini(path: Path) -> None:
    doc = json.loads(path.read_text())
    params = sanitize_parameters(doc["schema"])
    declaration: dict[str, Any] = {"name": "f"}
    if params is not None:
        declaration["parameters"] = params
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [declaration]}],
    }
    GEMINI_UNARY_WIRE.parse_request(body, {"model": "gemini-2.5-flash"})
    schema = sanitize_schema(doc["schema"])
    if schema.get("properties") or schema.get("type") not in ("object", None):
        body = {
            "contents": body["contents"],
            "generationConfig": {"responseMimeType": "application/json", "responseSchema": schema},
        }
        GEMINI_UNARY_WIRE.parse_request(body, {"model": "gemini-2.5-flash"})


def test_schema_depth_is_bounded() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        schema = {"type": "object", "properties": {"x": schema}}
    out = sanitize_schema(schema)
    depth = 0
    node = out
    while "properties" in node:
        node = node["properties"]["x"]
        depth += 1
    assert depth <= 40


def test_schema_all_of_self_reference_terminates() -> None:
    schema = {"$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}], "type": "object"}}, "$ref": "#/$defs/A"}
    assert sanitize_schema(schema) == {"type": "object"}


# ---- golden: stream and response translation ------------------------------------------------------------


def _translator(calls: list[Any]) -> GeminiStreamTranslator:
    ids = itertools.count()
    return GeminiStreamTranslator(
        created=CREATED, on_call=lambda *a: calls.append(list(a)), id_factory=lambda: f"call_gen_{next(ids)}"
    )


def _translate(frames: list[dict[str, Any]]) -> dict[str, Any]:
    calls: list[Any] = []
    translator = _translator(calls)
    chunks: list[Any] = []
    try:
        for frame in frames:
            chunks.extend(translator.feed(frame))
    except UpstreamError as exc:
        return {"chunks": chunks, "error": exc.message, "calls": calls}
    chunks.extend(translator.finish())
    return {"chunks": chunks, "done": translator.done, "calls": calls}


@pytest.mark.parametrize("path", _golden("stream"), ids=lambda p: p.stem)
def test_stream_translation_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    check_golden(path, doc, _translate(doc["frames"]))


@pytest.mark.parametrize("path", _golden("response"), ids=lambda p: p.stem)
def test_response_translation_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    calls: list[Any] = []
    ids = itertools.count()
    try:
        actual: Any = {
            "chunks": response_to_chunks(
                doc["response"],
                created=CREATED,
                on_call=lambda *a: calls.append(list(a)),
                id_factory=lambda: f"call_gen_{next(ids)}",
            ),
            "calls": calls,
        }
    except UpstreamError as exc:
        actual = {"error": exc.message}
    check_golden(path, doc, actual)


def _pump(chunks: list[dict[str, Any]], *, saw_done: bool) -> tuple[list[dict[str, Any]], Any]:
    return pump_chunks("gemini-x", chunks, saw_done=saw_done)


def test_translated_calls_fold_into_complete_tool_calls() -> None:
    doc = json.loads((GOLDEN / "stream_function_calls.json").read_text())
    got = _translate(doc["frames"])
    _, result = _pump(got["chunks"], saw_done=got["done"])
    assert result.text == "Checking both."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("call_gen_0", "get_weather", {"city": "Paris", "units": {"temp": "c"}}),
        ("gem-7", "get_time", {}),
    ]
    assert result.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}


def test_translated_thinking_gives_reasoning_before_text() -> None:
    doc = json.loads((GOLDEN / "stream_thinking_text.json").read_text())
    got = _translate(doc["frames"])
    out, result = _pump(got["chunks"], saw_done=got["done"])
    assert result.reasoning == "Let me think about it."
    assert result.text == "Answer."
    first_content = next(
        i for i, c in enumerate(out) if c.get("choices") and c["choices"][0]["delta"].get("content")
    )
    assert any(c["choices"][0]["delta"].get("reasoning_content") for c in out[:first_content])


def test_stream_without_finish_reason_is_a_cut_and_a_blocked_prompt_is_empty() -> None:
    got = _translate(json.loads((GOLDEN / "stream_no_finish.json").read_text())["frames"])
    assert got["done"] is False
    with pytest.raises(UpstreamError, match="stream ended unexpectedly"):
        _pump(got["chunks"], saw_done=False)
    blocked = _translate(json.loads((GOLDEN / "stream_prompt_blocked.json").read_text())["frames"])
    with pytest.raises(UpstreamError, match="empty completion"):
        _pump(blocked["chunks"], saw_done=blocked["done"])


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("OTHER", "stop"),
        ("MALFORMED_FUNCTION_CALL", "stop"),
        ("FINISH_REASON_UNSPECIFIED", None),
        (None, None),
    ],
)
def test_finish_reason_mapping(reason: Any, expected: Any) -> None:
    assert finish_reason_of(reason) == expected


# ---- the thought-signature cache -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_signature_cache_by_id_and_by_name_and_arguments() -> None:
    cache = SignatureCache()
    cache.remember("call_1", "f", {"b": 1, "a": [1, 2]}, "SIG", native_id=False)
    assert cache.signature_for("call_1", "f", "whatever") == "SIG"
    # Another id (a client that rewrote it): found by name + arguments, whatever the key order or spacing.
    assert cache.signature_for("other", "f", '{ "a": [1,2], "b": 1 }') == "SIG"
    assert cache.signature_for("other", "g", '{"a": [1, 2], "b": 1}') is None
    assert cache.signature_for("other", "f", '{"a": [1, 2], "b": 2}') is None
    assert not cache.is_native_id("call_1")


def test_signature_cache_expires_and_is_bounded() -> None:
    clock = Clock()
    cache = SignatureCache(max_entries=4, ttl_s=60, clock=clock)
    cache.remember("a", "f", {}, "S1", native_id=False)  # two keys: id and call
    clock.now += 59
    assert cache.signature_for("a", "f", "{}") == "S1"
    clock.now += 2
    assert cache.signature_for("a", "f", "{}") is None
    assert len(cache) == 0
    for i in range(10):
        cache.remember(f"id{i}", "f", {"i": i}, f"S{i}", native_id=False)
    assert len(cache) == 4
    assert cache.signature_for("id9", "x", "{}") == "S9"
    assert cache.signature_for("id0", "f", '{"i": 0}') is None


def test_signature_cache_stores_native_ids_and_skips_empty_calls() -> None:
    cache = SignatureCache()
    cache.remember("gem-1", "f", {}, None, native_id=True)
    cache.remember("call_x", "f", {}, None, native_id=False)
    assert cache.is_native_id("gem-1") and not cache.is_native_id("call_x")
    assert len(cache) == 1
    assert cache.signature_for("gem-1", "f", "{}") is None


async def test_provider_signatures_round_trip_between_requests() -> None:
    provider = GeminiProvider(_config("http://gemini.invalid/v1beta"), None)  # type: ignore[arg-type]
    doc = json.loads((GOLDEN / "stream_function_calls.json").read_text())
    translator = GeminiStreamTranslator(on_call=provider._remember)
    chunks = [c for f in doc["frames"] for c in translator.feed(f)]
    call_ids = [
        c["choices"][0]["delta"]["tool_calls"][0]["id"]
        for c in chunks
        if c["choices"][0]["delta"].get("tool_calls")
    ]
    second = {
        "model": "gemini-3-flash-preview",
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_ids[0],
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"city":"Paris","units":{"temp":"c"}}',
                        },
                    },
                    {"id": call_ids[1], "function": {"name": "get_time", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": call_ids[0], "content": "sunny"},
            {"role": "tool", "tool_call_id": call_ids[1], "content": "noon"},
        ],
    }
    body = provider.build_body(
        parse_chat_request(second).upstream_body("gemini-3-flash-preview", stream=True)
    )
    model_turn = body["contents"][1]["parts"]
    assert model_turn[0]["thoughtSignature"] == "U0lHLTE="
    assert model_turn[1] == {"functionCall": {"id": "gem-7", "name": "get_time", "args": {}}}
    assert body["contents"][2]["parts"][1]["functionResponse"] == {
        "id": "gem-7",
        "name": "get_time",
        "response": {"output": "noon"},
    }


# ---- errors and the classifier ---------------------------------------------------------------------------


def _google_error(status: int, code: str, message: str, *details: dict[str, Any]) -> dict[str, Any]:
    err: dict[str, Any] = {"code": status, "message": message, "status": code}
    if details:
        err["details"] = list(details)
    return {"error": err}


def _http(status: int, code: str, message: str, *details: dict[str, Any]) -> UpstreamError:
    """The error the provider raises for this HTTP answer (as :func:`post_json` + the retryDelay hint)."""
    body = _google_error(status, code, message, *details)
    return UpstreamError(
        http_error_message(status, gemini_error_message(body)),
        status=status,
        retry_after_s=retry_delay_of(body),
        body=body,
    )


RETRY_17 = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}


def _quota(quota_id: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
            {
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
            }
        ],
    }


KEY_INVALID = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
}
QUOTA_TEXT = "You exceeded your current quota, please check your plan and billing details."


@pytest.mark.parametrize(
    ("err", "kind", "error_class"),
    [
        (
            _http(
                429,
                "RESOURCE_EXHAUSTED",
                QUOTA_TEXT,
                _quota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
                RETRY_17,
            ),
            FailureKind.RETRYABLE,
            "rate_limited",
        ),
        (
            _http(
                429,
                "RESOURCE_EXHAUSTED",
                QUOTA_TEXT,
                _quota("GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
                RETRY_17,
            ),
            FailureKind.RETRYABLE,
            "daily_quota_exhausted",
        ),
        (
            _http(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", KEY_INVALID),
            FailureKind.KEY_AUTH,
            "auth",
        ),
        (
            _http(400, "INVALID_ARGUMENT", "API key expired. Please renew the API key."),
            FailureKind.KEY_AUTH,
            "auth",
        ),
        (
            _http(403, "PERMISSION_DENIED", "The caller does not have permission"),
            FailureKind.RETRYABLE,
            "forbidden",
        ),
        (
            _http(
                404,
                "NOT_FOUND",
                "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.",
            ),
            FailureKind.RETRYABLE,
            "model_not_found",
        ),
        (
            _http(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            ),
            FailureKind.RETRYABLE,
            "context_too_large",
        ),
        (
            _http(
                400,
                "INVALID_ARGUMENT",
                "* GenerateContentRequest.tools[0].function_declarations[0].parameters.properties: should be non-empty for OBJECT type",
            ),
            FailureKind.RETRYABLE,
            "provider_bad_request",
        ),
        (
            _http(400, "FAILED_PRECONDITION", "User location is not supported for the API use."),
            FailureKind.RETRYABLE,
            "provider_bad_request",
        ),
        (_http(500, "INTERNAL", "An internal error has occurred."), FailureKind.RETRYABLE, "upstream_error"),
        (
            _http(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            FailureKind.RETRYABLE,
            "upstream_error",
        ),
        (
            inband_error(
                _google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
            ),
            FailureKind.RETRYABLE,
            "upstream_error",
        ),
        (
            inband_error(
                _google_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
            ),
            FailureKind.RETRYABLE,
            "rate_limited",
        ),
        (
            inband_error(
                _google_error(
                    400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", KEY_INVALID
                )
            ),
            FailureKind.KEY_AUTH,
            "auth",
        ),
    ],
    ids=lambda v: getattr(v, "message", None) or str(v),
)
def test_gemini_errors_classify_like_their_meaning(
    err: UpstreamError, kind: FailureKind, error_class: str
) -> None:
    failure = classify(err)
    assert failure.kind is kind
    assert failure.error_class == error_class


def test_resource_exhausted_keeps_its_retry_delay() -> None:
    err = _http(429, "RESOURCE_EXHAUSTED", QUOTA_TEXT, RETRY_17)
    assert err.retry_after_s == 17.0
    failure = classify(err)
    assert failure.rate_limit_signal and failure.retry_after_s == 17.0


def test_error_message_wording() -> None:
    body = _google_error(
        429, "RESOURCE_EXHAUSTED", "Quota exceeded.", _quota("PerMinute"), RETRY_17, KEY_INVALID
    )
    assert gemini_error_message(body) == "RESOURCE_EXHAUSTED: Quota exceeded. (PerMinute, API_KEY_INVALID)"
    assert gemini_error_message({"error": {"code": 500, "message": "boom"}}) == "boom"
    assert gemini_error_message([body]) == gemini_error_message(body)  # a JSON-array stream's error
    assert gemini_error_message("<html>bad gateway</html>") == "<html>bad gateway</html>"
    assert inband_error(body).message.startswith(
        "in-band provider error: RESOURCE_EXHAUSTED: Quota exceeded."
    )
    assert inband_error(body).retry_after_s == 17.0


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [
        ("17s", 17.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        ("2m", 120.0),
        ({"seconds": 3, "nanos": 500_000_000}, 3.5),
        ("0s", None),
        ("soon", None),
        ("999999s", 86400.0),
    ],
)
def test_retry_delay_forms(delay: Any, seconds: float | None) -> None:
    body = _google_error(
        429,
        "RESOURCE_EXHAUSTED",
        "x",
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
    )
    assert retry_delay_of(body) == seconds
    assert retry_delay_of({"error": {"code": 429}}) is None
    assert retry_delay_of("nope") is None


# ---- remote images ----------------------------------------------------------------------------------------

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" + b"\x00" * 32


@pytest.fixture
async def image_server() -> AsyncIterator[str]:
    async def cat(_: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="image/png")

    async def octet(_: web.Request) -> web.Response:
        return web.Response(body=JPEG_HEAD, content_type="application/octet-stream")

    async def big(_: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "image/png"})  # no Content-Length: read to the cap
        await resp.prepare(_)
        for _i in range(20):
            await resp.write(b"\x89PNG" + b"\x00" * 1020)
        await resp.write_eof()
        return resp

    async def page(_: web.Request) -> web.Response:
        return web.Response(text="<html>not an image</html>", content_type="text/html")

    async def hop(_: web.Request) -> web.Response:
        raise web.HTTPFound("/cat.png")

    async def loop_hop(request: web.Request) -> web.Response:
        raise web.HTTPFound(str(request.url))

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(body=PNG, content_type="image/png")

    async def missing(_: web.Request) -> web.Response:
        return web.Response(status=404)

    app = web.Application()
    for path, handler in (
        ("/cat.png", cat),
        ("/octet", octet),
        ("/big.png", big),
        ("/page", page),
        ("/hop", hop),
        ("/loop", loop_hop),
        ("/slow.png", slow),
        ("/missing.png", missing),
    ):
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_images_are_fetched_within_their_limits(image_server: str) -> None:
    async with aiohttp.ClientSession() as session:
        provider = GeminiProvider(
            _config("http://unused/v1beta"),
            session,
            allow_private_image_hosts=True,
            image_max_bytes=8 * 1024,
            image_fetch_timeout_s=1.0,
        )
        urls = [
            f"{image_server}/{p}"
            for p in ("cat.png", "octet", "big.png", "page", "hop", "loop", "slow.png", "missing.png")
        ]
        got = await provider.fetch_images(urls)
    b64 = base64.b64encode(PNG).decode()
    assert got == {
        f"{image_server}/cat.png": {"mimeType": "image/png", "data": b64},
        f"{image_server}/octet": {"mimeType": "image/jpeg", "data": base64.b64encode(JPEG_HEAD).decode()},
        f"{image_server}/hop": {"mimeType": "image/png", "data": b64},
    }


async def test_images_on_private_hosts_are_refused_by_default(image_server: str) -> None:
    async with aiohttp.ClientSession() as session:
        provider = GeminiProvider(_config("http://unused/v1beta"), session)
        host = image_server.replace("127.0.0.1", "localhost")
        assert await provider.fetch_images([f"{image_server}/cat.png", f"{host}/cat.png"]) == {}
        limited = GeminiProvider(
            _config("http://unused/v1beta"), session, allow_private_image_hosts=True, image_max_count=1
        )
        got = await limited.fetch_images([f"{image_server}/cat.png", f"{image_server}/hop"])
        assert list(got) == [f"{image_server}/cat.png"]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
    ],
)
async def test_non_public_addresses_are_refused(address: str) -> None:
    assert not _is_public(address)
    with pytest.raises(_Refused):
        await _check_public_host(address, None)


async def test_public_addresses_pass() -> None:
    assert _is_public("8.8.8.8") and _is_public("2001:4860:4860::8888")
    await _check_public_host("8.8.8.8", 443)


async def test_fetched_image_reaches_gemini_inline(image_server: str, sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gim")), session, allow_private_image_hosts=True)
    request = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": f"{image_server}/cat.png"}},
                    {"type": "image_url", "image_url": {"url": f"{image_server}/page"}},
                ],
            }
        ]
    }
    upstream = await provider.open(
        parse_chat_request(request).upstream_body("gemini-2.5-flash", stream=False),
        "k",
        stream=False,
        timeouts=FAST,
    )
    [_ async for _ in upstream]
    [record] = await ctl.requests_async("gim")
    assert record["body"]["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is this?"},
                {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}},
            ],
        }
    ]


# ---- the provider against the simulator (I/O, timeouts, statuses) ---------------------------------------


def _config(base_url: str, name: str = "gem") -> ProviderConfig:
    return ProviderConfig(name=name, kind="gemini", base_url=base_url, keys=["k"])


def _gemini_url(sim: SimServer, provider: str) -> str:
    return f"{sim.base_url}/{provider}/v1beta"


CHAT = {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]}
FAST = Timeouts(connect=2, first_byte=2, stall=2)
MODEL = "gemini-2.5-flash"


async def _collect(
    provider: GeminiProvider,
    *,
    stream: bool,
    timeouts: Timeouts = FAST,
    request: dict[str, Any] | None = None,
) -> tuple[list[Any], bool]:
    body = parse_chat_request(request or CHAT).upstream_body(MODEL, stream=stream)
    upstream = await provider.open(body, "AIza-test-key", stream=stream, timeouts=timeouts)
    try:
        chunks = [c async for c in upstream]
    finally:
        await upstream.aclose()
    return chunks, upstream.saw_done


def _text(chunks: list[Any], field: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(field) or "" for c in chunks if c["choices"])


async def test_provider_streams_with_the_key_in_a_header_only(sim_and_session: Any) -> None:
    sim, ctl, _ = sim_and_session
    seen: dict[str, Any] = {}

    async def on_request_start(_s: Any, _ctx: Any, params: aiohttp.TraceRequestStartParams) -> None:
        seen["url"] = str(params.url)
        seen["headers"] = dict(params.headers)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    cfg = ProviderConfig(
        name="gem", kind="gemini", base_url=_gemini_url(sim, "gem") + "/", headers={"x-extra": "1"}
    )
    async with aiohttp.ClientSession(trace_configs=[trace]) as traced:
        provider = GeminiProvider(cfg, traced)
        await ctl.script_async(
            "gem", {"text": "Hello there", "reasoning": "hm", "malformed": True, "keepalive_comments": 2}
        )
        chunks, done = await _collect(provider, stream=True)
    assert done is True
    assert (_text(chunks), _text(chunks, "reasoning_content")) == ("Hello there", "hm")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["usage"]["prompt_tokens"] >= 1
    assert seen["url"] == f"{sim.base_url}/gem/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    assert "AIza" not in seen["url"] and "key=" not in seen["url"]
    assert seen["headers"]["x-goog-api-key"] == "AIza-test-key"
    assert seen["headers"]["x-extra"] == "1"
    assert "Authorization" not in seen["headers"]
    [record] = await ctl.requests_async("gem")
    assert record["key"] == "AIza-test-key" and record["stream"] is True
    assert record["body"] == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "sys"}]},
    }


async def test_provider_non_stream_function_call(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gem")), session)
    await ctl.script_async("gem", {"tool_calls": [{"name": "f", "arguments": {"x": 1}}]})
    chunks, done = await _collect(provider, stream=False)
    assert done is True
    calls = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or ()]
    [call] = calls
    assert call["id"].startswith("call_") and len(call["id"]) == len("call_") + 24
    assert call["function"] == {"name": "f", "arguments": '{"x":1}'}
    assert call["thought_signature"] == thought_signature_of("f", '{"x": 1}')
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert provider.signatures.signature_for(call["id"], "f", "{}") == call["thought_signature"]
    [record] = await ctl.requests_async("gem")
    assert record["stream"] is False


async def test_provider_reads_a_json_array_body(sim_and_session: Any) -> None:
    """A proxy that answers ``:generateContent`` with a one-element array is read too."""
    sim, _, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gem")), session)
    answer = [
        {"candidates": [{"content": {"parts": [{"text": "ok"}], "role": "model"}, "finishReason": "STOP"}]}
    ]

    async def handler(_: web.Request) -> web.Response:
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/v1beta/models/{target}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        provider = GeminiProvider(_config(f"http://127.0.0.1:{port}/v1beta"), session)
        chunks, _ = await _collect(provider, stream=False)
    finally:
        await runner.cleanup()
    assert _text(chunks) == "ok"


@pytest.mark.parametrize("stream", [True, False])
async def test_provider_http_errors_carry_status_retry_delay_and_body(
    sim_and_session: Any, stream: bool
) -> None:
    sim, ctl, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gem")), session)
    await ctl.script_async(
        "gem", {"status": 429, "retry_after": 17, "error_message": "Resource has been exhausted"}
    )
    with pytest.raises(UpstreamError) as info:
        await _collect(provider, stream=stream)
    err = info.value
    assert (err.status, err.retry_after_s) == (429, 17.0)
    assert err.message == (
        "API error 429: RESOURCE_EXHAUSTED: Resource has been exhausted "
        "(GenerateRequestsPerMinutePerProjectPerModel-FreeTier)"
    )
    assert classify(err).error_class == "rate_limited"
    await ctl.script_async(
        "gem", {"status": 400, "error_message": "API key not valid. Please pass a valid API key."}
    )
    with pytest.raises(UpstreamError) as info:
        await _collect(provider, stream=stream)
    assert "API_KEY_INVALID" in info.value.message and classify(info.value).kind is FailureKind.KEY_AUTH
    await ctl.script_async("gem", {"status": 503, "error_message": "The model is overloaded."})
    with pytest.raises(UpstreamError) as info:
        await _collect(provider, stream=stream)
    assert info.value.status == 503 and classify(info.value).kind is FailureKind.RETRYABLE


async def test_provider_inband_errors(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gem")), session)
    await ctl.script_async(
        "gem",
        {
            "text": "aaaabbbbcccc",
            "chunks": 3,
            "inband_error": "The model is overloaded",
            "inband_error_after": 2,
        },
    )
    body = parse_chat_request(CHAT).upstream_body(MODEL, stream=True)
    upstream = await provider.open(body, "k", stream=True, timeouts=FAST)
    received: list[str] = []
    with pytest.raises(UpstreamError, match="in-band provider error: UNAVAILABLE: The model is overloaded"):
        async for chunk in upstream:
            if chunk["choices"]:
                received.append(chunk["choices"][0]["delta"].get("content") or "")
    await upstream.aclose()
    assert "".join(received) == "aaaabbbb"
    await ctl.script_async("gem", {"inband_error": "boom"})
    with pytest.raises(UpstreamError, match="in-band provider error: INTERNAL: boom"):
        await _collect(provider, stream=False)


async def test_provider_timeouts_and_transport_match_the_openai_wire(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gem")), session)
    short = Timeouts(connect=1, first_byte=0.3, stall=0.3)
    await ctl.script_async("gem", {"first_byte_delay_ms": 2000})
    with pytest.raises(UpstreamError, match="no first byte within") as info:
        await _collect(provider, stream=True, timeouts=short)
    assert info.value.timeout
    await ctl.script_async("gem", {"stall_after": 1, "chunks": 3})
    with pytest.raises(UpstreamError, match="stream stalled") as info:
        await _collect(provider, stream=True, timeouts=short)
    assert info.value.timeout
    await ctl.script_async("gem", {"cut_after": 1, "chunks": 3})
    with pytest.raises(UpstreamError, match="stream ended unexpectedly") as info:
        await _collect(provider, stream=True)
    assert info.value.transport
    dead = GeminiProvider(_config("http://127.0.0.1:9/v1beta"), session)
    with pytest.raises(UpstreamError, match="fetch failed") as info:
        await _collect(dead, stream=True)
    assert info.value.transport


async def test_provider_stream_without_finish_reason_is_not_done(sim_and_session: Any) -> None:
    sim, ctl, session = sim_and_session
    provider = GeminiProvider(_config(_gemini_url(sim, "gem")), session)
    await ctl.script_async("gem", {"done": False, "text": "ok"})
    chunks, done = await _collect(provider, stream=True)
    assert done is False
    assert _text(chunks) == "ok"
    assert all(not c["choices"] or c["choices"][0]["finish_reason"] is None for c in chunks)


def test_registry_builds_gemini_providers() -> None:
    providers = build_providers([_config("https://generativelanguage.googleapis.com/v1beta")], None)  # type: ignore[arg-type]
    provider = providers["gem"]
    assert isinstance(provider, GeminiProvider)
    assert provider.url("gemini-2.5-flash", stream=False) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert provider.url("models/gemini-2.5-flash", stream=True) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert provider.url("odd id/x", stream=False).endswith("/models/odd%20id%2Fx:generateContent")


# ---- the simulator's Gemini wire -------------------------------------------------------------------------

VIEW_BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def _frames(scenario: dict[str, Any], wire: Any = GEMINI_SSE_WIRE) -> list[tuple[Any, FrameKind]]:
    sc = parse_scenario(scenario)
    view = wire.parse_request(VIEW_BODY, {"model": MODEL})
    plan = build_plan(sc, "p", MODEL, view.prompt_chars, "abcd1234")
    out: list[tuple[Any, FrameKind]] = []
    for data, kind in wire.render_stream(plan, sc, view, "resp-1", CREATED):
        text = data.decode()
        if text.startswith("data: {") and text.endswith("\r\n\r\n"):
            try:
                out.append((json.loads(text[len("data: ") :]), kind))
                continue
            except ValueError:
                pass
        out.append((text, kind))  # comments, garbage, JSON-array framing
    return out


def test_sim_stream_frames() -> None:
    frames = _frames(
        {
            "text": "Hi there",
            "chunks": 2,
            "reasoning": "hmm",
            "tool_calls": [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "id": "gid"}],
        }
    )
    parts = [f["candidates"][0]["content"]["parts"] for f, _ in frames]
    assert parts[:2] == [[{"text": "h", "thought": True}], [{"text": "mm", "thought": True}]]
    assert parts[2:4] == [[{"text": "Hi t"}], [{"text": "here"}]]
    assert parts[4] == [
        {
            "functionCall": {"name": "f", "args": {"a": 1}},
            "thoughtSignature": thought_signature_of("f", '{"a": 1}'),
        }
    ]
    assert parts[5] == [{"functionCall": {"id": "gid", "name": "g", "args": {}}}]
    assert [k for _, k in frames] == [FrameKind.PRE] * 2 + [FrameKind.CONTENT] * 4 + [FrameKind.POST]
    last = frames[-1][0]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"]["thoughtsTokenCount"] >= 1 and last["modelVersion"] == MODEL
    assert all(f["usageMetadata"] == {"promptTokenCount": 1, "totalTokenCount": 1} for f, _ in frames[:-1])


def test_sim_stream_faults() -> None:
    inband = _frames({"text": "abc", "chunks": 3, "inband_error": "Overloaded", "inband_error_after": 1})
    assert inband[-1][0] == {"error": {"code": 503, "message": "Overloaded", "status": "UNAVAILABLE"}}
    assert sum(1 for _, k in inband if k is FrameKind.CONTENT) == 1
    not_done = _frames({"done": False})
    assert "finishReason" not in not_done[-1][0]["candidates"][0] and "usageMetadata" in not_done[-1][0]
    assert _frames({"finish_reason": "length"})[-1][0]["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert _frames({"finish_reason": "content_filter"})[-1][0]["candidates"][0]["finishReason"] == "SAFETY"
    assert _frames({"finish_reason": "recitation"})[-1][0]["candidates"][0]["finishReason"] == "RECITATION"
    assert "finishReason" not in _frames({"finish_reason": None})[-1][0]["candidates"][0]
    empty = _frames({"empty": True, "text": "ignored"})
    assert [f["candidates"][0]["content"]["parts"] for f, _ in empty] == [[{"text": ""}], [{"text": ""}]]
    assert all("usageMetadata" not in f for f, _ in _frames({"usage": "none"}))
    assert [("usageMetadata" in f) for f, _ in _frames({"usage": "last", "chunks": 2})] == [
        False,
        False,
        True,
    ]
    malformed = _frames({"malformed": True})
    assert any("{not json" in f for f, _ in malformed if isinstance(f, str))
    keepalive = _frames({"keepalive_comments": 2})
    assert [f for f, _ in keepalive[:2]] == [": keep-alive\r\n\r\n"] * 2


def test_sim_json_array_stream_is_one_json_document() -> None:
    sc = parse_scenario({"text": "abc", "chunks": 3, "malformed": True, "keepalive_comments": 1})
    view = GEMINI_JSON_STREAM_WIRE.parse_request(VIEW_BODY, {"model": MODEL})
    plan = build_plan(sc, "p", MODEL, view.prompt_chars, "abcd1234")
    frames = GEMINI_JSON_STREAM_WIRE.render_stream(plan, sc, view, "r", CREATED)
    doc = json.loads(b"".join(f.data for f in frames))
    assert [p["text"] for d in doc[:-1] for p in d["candidates"][0]["content"]["parts"]] == ["a", "b", "c"]
    assert doc[-1]["candidates"][0]["finishReason"] == "STOP"
    assert frames[-1].data == b"]" and frames[-1].kind is FrameKind.POST


def test_sim_completion_and_envelopes() -> None:
    sc = parse_scenario({"text": "Hello", "reasoning": "r", "tool_calls": [{"name": "f", "arguments": "{}"}]})
    view = GEMINI_UNARY_WIRE.parse_request(VIEW_BODY, {"model": MODEL})
    plan = build_plan(sc, "p", MODEL, view.prompt_chars, "abcd1234")
    body = GEMINI_UNARY_WIRE.render_completion(plan, sc, view, "r", CREATED)
    cand = body["candidates"][0]
    assert cand["finishReason"] == "STOP"
    assert [list(p) for p in cand["content"]["parts"]] == [
        ["text", "thought"],
        ["text"],
        ["functionCall", "thoughtSignature"],
    ]
    err = GEMINI_UNARY_WIRE.render_error_with_retry(429, "slow down", "30")["error"]
    assert (err["code"], err["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert err["details"][-1] == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}
    assert retry_delay_of({"error": err}) == 30.0
    assert GEMINI_UNARY_WIRE.render_error(404, "x")["error"]["status"] == "NOT_FOUND"
    assert GEMINI_UNARY_WIRE.render_error(418, "x")["error"]["status"] == "INVALID_ARGUMENT"
    assert GEMINI_UNARY_WIRE.render_error(502, "x")["error"]["status"] == "INTERNAL"
    assert (
        GEMINI_UNARY_WIRE.render_error(400, "API key not valid.")["error"]["details"][0]["reason"]
        == "API_KEY_INVALID"
    )
    assert GEMINI_UNARY_WIRE.models_list("p", ["m"])["models"][0]["name"] == "models/m"


def test_sim_routing_helpers() -> None:
    assert split_target("gemini-2.5-flash:streamGenerateContent") == (
        "gemini-2.5-flash",
        "streamGenerateContent",
    )
    assert split_target("models/x:generateContent") == ("x", "generateContent")
    assert wire_for_action("generateContent", None) is GEMINI_UNARY_WIRE
    assert wire_for_action("streamGenerateContent", "sse") is GEMINI_SSE_WIRE
    assert wire_for_action("streamGenerateContent", None) is GEMINI_JSON_STREAM_WIRE
    assert wire_for_action("countTokens", None) is None


USER = {"role": "user", "parts": [{"text": "x"}]}


def _call_turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(calls)}


def _fr(name: str = "f") -> dict[str, Any]:
    return {"functionResponse": {"name": name, "response": {"output": "r"}}}


@pytest.mark.parametrize(
    ("body", "model", "fragment"),
    [
        ({"contents": [USER], "n": 1}, MODEL, 'Unknown name "n"'),
        ({"contents": []}, MODEL, "contents is not specified"),
        ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, MODEL, "valid role"),
        ({"contents": [{"role": "user", "parts": []}]}, MODEL, "must not be empty"),
        ({"contents": [{"role": "user", "parts": [{"text": ""}]}]}, MODEL, "empty text parameter"),
        (
            {
                "contents": [
                    {
                        "role": "user",
                        "parts": [{"text": "a", "inlineData": {"mimeType": "image/png", "data": "AA=="}}],
                    }
                ]
            },
            MODEL,
            "oneof field 'data'",
        ),
        ({"contents": [{"role": "user", "parts": [{"image_url": "x"}]}]}, MODEL, 'Unknown name "image_url"'),
        (
            {
                "contents": [
                    {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "@@@"}}]}
                ]
            },
            MODEL,
            "Base64 decoding failed",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"functionCall": {"name": "f"}}]}]},
            MODEL,
            "only allowed in model turns",
        ),
        (
            {
                "contents": [
                    USER,
                    _call_turn({"functionCall": {"name": "f", "args": {}}}),
                    {"role": "user", "parts": [{"text": "no result"}]},
                ]
            },
            MODEL,
            "number of function response parts",
        ),
        (
            {"contents": [_call_turn({"functionCall": {"name": "f"}}), {"role": "user", "parts": [_fr()]}]},
            MODEL,
            "comes immediately after a user turn",
        ),
        (
            {
                "contents": [
                    USER,
                    _call_turn({"functionCall": {"name": "f"}}),
                    {"role": "user", "parts": [_fr()]},
                ]
            },
            "gemini-3-flash-preview",
            "missing a thought_signature",
        ),
        (
            {"contents": [USER], "systemInstruction": {"parts": [{"text": "s"}]}},
            "gemma-4-31b-it",
            "Developer instruction is not enabled",
        ),
        (
            {"contents": [USER], "generationConfig": {"responseMimeType": "application/json"}},
            "gemma-4-31b-it",
            "JSON mode is not enabled",
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {"a": {"type": "string"}},
                                },
                            }
                        ]
                    }
                ],
            },
            MODEL,
            'Unknown name "additionalProperties"',
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {"name": "f", "parameters": {"type": "object", "properties": {}}}
                        ]
                    }
                ],
            },
            MODEL,
            "should be non-empty for OBJECT type",
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {
                                    "type": "object",
                                    "properties": {"a": {"type": ["string", "null"]}},
                                },
                            }
                        ]
                    }
                ],
            },
            MODEL,
            "Proto field is not repeating",
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {"type": "object", "properties": {"a": {"type": "array"}}},
                            }
                        ]
                    }
                ],
            },
            MODEL,
            "items: missing field",
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {
                                    "type": "object",
                                    "properties": {"a": {"type": "integer", "enum": ["1"]}},
                                },
                            }
                        ]
                    }
                ],
            },
            MODEL,
            "only allowed for STRING type",
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {
                                    "type": "object",
                                    "properties": {"a": {"type": "string", "format": "email"}},
                                },
                            }
                        ]
                    }
                ],
            },
            MODEL,
            "'enum' and 'date-time'",
        ),
        (
            {
                "contents": [USER],
                "tools": [
                    {
                        "functionDeclarations": [
                            {
                                "name": "f",
                                "parameters": {
                                    "type": "object",
                                    "properties": {"a": {"type": "string"}},
                                    "required": ["b"],
                                },
                            }
                        ]
                    }
                ],
            },
            MODEL,
            "property is not defined",
        ),
        (
            {"contents": [USER], "tools": [{"functionDeclarations": [{"name": "bad name!"}]}]},
            MODEL,
            "Invalid function name",
        ),
        (
            {
                "contents": [USER],
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
                "generationConfig": {"responseMimeType": "application/json"},
            },
            MODEL,
            "response mime type",
        ),
        (
            {"contents": [USER], "generationConfig": {"stopSequences": ["1", "2", "3", "4", "5", "6"]}},
            MODEL,
            "at most 5",
        ),
        (
            {
                "contents": [USER],
                "generationConfig": {"thinkingConfig": {"thinkingBudget": 10, "thinkingLevel": "low"}},
            },
            MODEL,
            "cannot set both",
        ),
        ({"contents": [USER], "generationConfig": {"maxTokens": 5}}, MODEL, 'Unknown name "maxTokens"'),
        (
            {
                "contents": [USER],
                "toolConfig": {"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["f"]}},
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
            },
            MODEL,
            "only be set when mode is ANY",
        ),
    ],
)
def test_sim_rejects_what_gemini_rejects(body: dict[str, Any], model: str, fragment: str) -> None:
    with pytest.raises(WireRequestError) as info:
        GEMINI_UNARY_WIRE.parse_request(body, {"model": model})
    assert fragment in str(info.value)


def test_sim_accepts_signed_and_sentinel_calls_and_old_history() -> None:
    signed = {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "c2ln"}
    sentinel = {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": SKIP_SIGNATURE}
    unsigned = {"functionCall": {"name": "f", "args": {}}}
    body = {
        "contents": [
            USER,
            _call_turn(unsigned),  # an earlier turn: not validated
            {"role": "user", "parts": [_fr()]},
            {"role": "user", "parts": [{"text": "next question"}]},
            _call_turn(signed, unsigned),  # parallel: only the first carries one
            {"role": "user", "parts": [_fr(), _fr()]},
            _call_turn(sentinel),
            {"role": "user", "parts": [_fr()]},
        ]
    }
    GEMINI_UNARY_WIRE.parse_request(body, {"model": "gemini-3-flash-preview"})


async def test_sim_http_routes(sim_and_session: Any) -> None:
    sim, _, session = sim_and_session
    url = f"{sim.base_url}/gw/v1beta/models/{MODEL}"
    headers = {"x-goog-api-key": "k"}
    async with session.post(f"{url}:generateContent", json=VIEW_BODY) as resp:
        assert resp.status == 401
        assert (await resp.json())["error"]["status"] == "UNAUTHENTICATED"
    async with session.post(f"{url}:streamGenerateContent?alt=sse", json=VIEW_BODY, headers=headers) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        assert (await resp.read()).startswith(b"data: {")
    async with session.post(f"{url}:streamGenerateContent", json=VIEW_BODY, headers=headers) as resp:
        assert resp.content_type == "application/json"
        assert isinstance(orjson.loads(await resp.read()), list)
    async with session.post(
        f"{sim.base_url}/v1/models/{MODEL}:generateContent", json=VIEW_BODY, headers=headers
    ) as resp:
        assert resp.status == 200 and "candidates" in await resp.json()
    async with session.post(f"{url}:countTokens", json=VIEW_BODY, headers=headers) as resp:
        assert resp.status == 404 and (await resp.json())["error"]["status"] == "NOT_FOUND"
    async with session.get(f"{sim.base_url}/gw/v1beta/models", headers=headers) as resp:
        assert [m["name"] for m in (await resp.json())["models"]][:1] == ["models/model-x"]
    ctl = SimControl(sim.base_url)
    await ctl.script_async("gw", {"status": 429, "retry_after": 30})
    async with session.post(f"{url}:generateContent", json=VIEW_BODY, headers=headers) as resp:
        assert resp.status == 429 and "Retry-After" not in resp.headers  # Gemini states it in the body
        assert retry_delay_of(await resp.json()) == 30.0
    await ctl.script_async("gw", {"status": 429, "retry_after": "Wed, 21 Oct 2099 07:28:00 GMT"})
    async with session.post(f"{url}:generateContent", json=VIEW_BODY, headers=headers) as resp:
        assert resp.headers["Retry-After"].startswith("Wed")  # a date has no RetryInfo form: the header
    async with session.post(f"{url}:generateContent", json={"contents": []}, headers=headers) as resp:
        assert resp.status == 400 and (await resp.json())["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"description": "any"}}}, "type: must be specified"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "properties": {"b": {"type": "string"}}}},
            },
            "only allowed for OBJECT type",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string", "items": {"type": "string"}}}},
            "only allowed for ARRAY type",
        ),
    ],
)
def test_sim_schema_type_rules(schema: dict[str, Any], fragment: str) -> None:
    body = {"contents": [USER], "tools": [{"functionDeclarations": [{"name": "f", "parameters": schema}]}]}
    with pytest.raises(WireRequestError, match=fragment):
        GEMINI_UNARY_WIRE.parse_request(body, {"model": MODEL})
