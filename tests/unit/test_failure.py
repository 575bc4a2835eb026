"""The failure classifier: every table row of spec §3 "Classification" → Failure fields."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from freellm.engine.failure import (
    ERROR_CLASSES,
    CooldownKind,
    Failure,
    FailureKind,
    classify,
    http_error_message,
    parse_retry_after,
)
from freellm.errors import UpstreamError

K = FailureKind
C = CooldownKind


def E(message: str, **kw: Any) -> UpstreamError:
    return UpstreamError(message, **kw)


def check(f: Failure, expected: dict[str, Any]) -> None:
    got = {k: getattr(f, k) for k in expected}
    assert got == expected


# ── Key-auth ──────────────────────────────────────────────────────────────────────────────────────

KEY_AUTH_CASES = [
    ("401 status", E("API error 401: Invalid API Key", status=401)),
    ("401 any wording", E("API error 401: something", status=401)),
    (
        "gemini 400 key not valid",
        E("API error 400: API key not valid. Please pass a valid API key.", status=400),
    ),
    ("gemini 400 key expired", E("API error 400: API key expired. Please renew the API key.", status=400)),
    ("gemini 400 API_KEY_INVALID", E("API error 400: INVALID_ARGUMENT API_KEY_INVALID", status=400)),
    ("no status unauthorized", E("Unauthorized")),
    ("no status invalid api key", E("in-band provider error: Invalid API Key")),
    ("no status invalid_api_key code", E("error code invalid_api_key")),
    ("no status incorrect api key", E("Incorrect API key provided")),
    ("no status authentication failed", E("Authentication failed")),
    ("no status authentication_error", E("in-band provider error: authentication_error")),
    ("no status 401 digits", E("upstream said 401")),
]


@pytest.mark.parametrize(("name", "err"), KEY_AUTH_CASES, ids=[c[0] for c in KEY_AUTH_CASES])
def test_key_auth(name: str, err: UpstreamError) -> None:
    check(
        classify(err),
        {
            "kind": K.KEY_AUTH,
            "error_class": "auth",
            "cooldown": C.AUTH,
            "skip_model": False,
            "skip_provider": False,
            "skip_bench": False,
            "rate_limit_signal": False,
        },
    )


NOT_KEY_AUTH_CASES = [
    # Generic auth wording with a status is not about the key.
    ("400 unauthorized wording is fatal", E("unauthorized parameter", status=400), K.FATAL),
    ("403 api key not valid stays forbidden", E("API key not valid", status=403), K.RETRYABLE),
    ("500 unauthorized wording is server error", E("unauthorized", status=500), K.RETRYABLE),
]


@pytest.mark.parametrize(("name", "err", "kind"), NOT_KEY_AUTH_CASES, ids=[c[0] for c in NOT_KEY_AUTH_CASES])
def test_not_key_auth(name: str, err: UpstreamError, kind: FailureKind) -> None:
    f = classify(err)
    assert f.kind is kind
    assert f.error_class != "auth"


# ── Retryable: status, transport, families, markers ──────────────────────────────────────────────

# (id, error, expected subset)
RETRYABLE_CASES: list[tuple[str, UpstreamError, dict[str, Any]]] = [
    # Status rules.
    ("408", E("API error 408: Request Timeout", status=408), {"error_class": "timeout"}),
    ("409", E("API error 409: conflict", status=409), {"error_class": "error", "skip_provider": False}),
    (
        "410 gone",
        E("API error 410: Gone", status=410),
        {"error_class": "model_not_found", "skip_model": True, "cooldown": C.TRANSIENT},
    ),
    (
        "422 mistral",
        E("API error 422: Unprocessable Entity", status=422),
        {"error_class": "provider_bad_request", "provider_bad_request": True, "skip_model": False},
    ),
    (
        "422 plain wording",
        E("validation failed", status=422),
        {"error_class": "provider_bad_request", "provider_bad_request": True},
    ),
    (
        "429",
        E("API error 429: Too Many Requests", status=429),
        {
            "error_class": "rate_limited",
            "rate_limit_signal": True,
            "cooldown": C.TRANSIENT,
            "skip_provider": False,
        },
    ),
    (
        "429 odd wording",
        E("slow down", status=429),
        {"error_class": "rate_limited", "rate_limit_signal": True},
    ),
    (
        "500",
        E("API error 500: Internal Server Error", status=500),
        {"error_class": "upstream_error", "skip_provider": True, "skip_model": False},
    ),
    ("502", E("bad gateway", status=502), {"error_class": "upstream_error", "skip_provider": True}),
    (
        "503",
        E("API error 503: Service Unavailable", status=503),
        {"error_class": "upstream_error", "skip_provider": True},
    ),
    (
        "504 timeout wording",
        E("Gateway Timeout", status=504),
        {"error_class": "timeout", "skip_provider": True},
    ),
    (
        "529 anthropic",
        E("overloaded_error", status=529),
        {"error_class": "upstream_error", "skip_provider": True},
    ),
    (
        "507 plain",
        E("insufficient storage", status=507),
        {"error_class": "upstream_error", "skip_provider": True},
    ),
    # Transport flag and cause chain.
    (
        "transport flag",
        E("connection dropped", transport=True),
        {"error_class": "upstream_error", "skip_provider": True, "rate_limit_signal": False},
    ),
    (
        "transport wording",
        E("Cannot connect to host api.x.com:443"),
        {"error_class": "upstream_error", "skip_provider": True},
    ),
    ("econnreset code", E("read ECONNRESET"), {"error_class": "upstream_error", "skip_provider": True}),
    (
        "undici code",
        E("UND_ERR_SOCKET other side closed"),
        {"error_class": "upstream_error", "skip_provider": True},
    ),
    ("fetch failed", E("fetch failed"), {"error_class": "upstream_error", "skip_provider": True}),
    ("socket hang up", E("socket hang up"), {"error_class": "upstream_error", "skip_provider": True}),
    ("terminated exact", E("terminated"), {"error_class": "upstream_error", "skip_provider": True}),
    # Timeout flag and wording.
    ("timeout flag", E("first byte", timeout=True), {"error_class": "timeout", "skip_provider": True}),
    ("timeout wording", E("request timeout after 60s"), {"error_class": "timeout", "skip_provider": True}),
    ("timed out wording", E("read timed out"), {"error_class": "timeout", "skip_provider": True}),
    ("aborted wording", E("The operation was aborted"), {"error_class": "timeout", "skip_provider": True}),
    ("etimedout", E("connect ETIMEDOUT 1.2.3.4:443"), {"error_class": "timeout", "skip_provider": True}),
    # Rate-limit / quota wording.
    (
        "rate limit wording no status",
        E("in-band provider error: Rate limit exceeded"),
        {"error_class": "rate_limited", "rate_limit_signal": True, "skip_provider": False},
    ),
    ("too many requests", E("Too Many Requests"), {"error_class": "rate_limited", "rate_limit_signal": True}),
    (
        "quota",
        E("You exceeded your current quota"),
        {"error_class": "rate_limited", "rate_limit_signal": True},
    ),
    (
        "resource_exhausted",
        E("RESOURCE_EXHAUSTED"),
        {"error_class": "rate_limited", "rate_limit_signal": True},
    ),
    (
        "429 digits no status",
        E("upstream returned 429"),
        {"error_class": "rate_limited", "rate_limit_signal": True},
    ),
    (
        "rate limit wording with a 400 is no quota signal",
        E("API error 400: rate limit on this parameter", status=400),
        {"rate_limit_signal": False},
    ),
    # 5xx / unavailable / degraded wording.
    (
        "unavailable wording",
        E("model unavailable"),
        {"error_class": "upstream_error", "skip_provider": False},
    ),
    ("503 digits no status", E("upstream error 503"), {"error_class": "upstream_error"}),
    ("internal server error wording", E("Internal Server Error"), {"error_class": "upstream_error"}),
    (
        "degraded nim 400",
        E("API error 400: Function id 'abc': DEGRADED function cannot be invoked", status=400),
        {
            "error_class": "upstream_error",
            "degraded": True,
            "provider_bad_request": False,
            "skip_provider": True,
        },
    ),
    ("degraded no status", E("deployment degraded"), {"degraded": True, "skip_provider": True}),
    # 413 / too large.
    (
        "413 status",
        E("API error 413: Request Entity Too Large", status=413),
        {"error_class": "context_too_large", "skip_model": True, "cooldown": C.NONE, "skip_provider": False},
    ),
    (
        "openai context 400",
        E("API error 400: This model's maximum context length is 8192 tokens.", status=400),
        {"error_class": "context_too_large", "skip_model": True, "provider_bad_request": False},
    ),
    (
        "anthropic prompt too long",
        E("prompt is too long: 210000 tokens > 200000 maximum", status=400),
        {"error_class": "context_too_large"},
    ),
    (
        "gemini input token count",
        E(
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            status=400,
        ),
        {"error_class": "context_too_large"},
    ),
    (
        "groq request too large",
        E("Request too large for model `x` on tokens per minute", status=413),
        {"error_class": "context_too_large"},
    ),
    ("payload too large", E("Payload Too Large"), {"error_class": "context_too_large"}),
    (
        "exceeds context window",
        E("input exceeds the model's context window", status=400),
        {"error_class": "context_too_large"},
    ),
    ("zhipu", E("Prompt exceeds max length", status=400), {"error_class": "context_too_large"}),
    (
        "body code context_length_exceeded",
        E("bad", status=400, body={"error": {"code": "context_length_exceeded"}}),
        {"error_class": "context_too_large"},
    ),
    ("413 digits no status", E("error 413"), {"error_class": "context_too_large"}),
    # 404 / 410 / not found / gone.
    (
        "404 status",
        E("API error 404: nope", status=404),
        {"error_class": "model_not_found", "skip_model": True},
    ),
    (
        "openrouter no endpoints",
        E("No endpoints found for foo", status=404),
        {"error_class": "model_not_found"},
    ),
    (
        "routeway 400 no model found",
        E("API error 400: No model found: llama:free", status=400),
        {"error_class": "model_not_found", "provider_bad_request": False},
    ),
    (
        "model id does not exist",
        E("The model 'o3-mini' does not exist", status=400),
        {"error_class": "model_not_found"},
    ),
    (
        "not supported for chat",
        E("model is not supported for chat completions", status=400),
        {"error_class": "model_not_found"},
    ),
    ("gone word", E("model gone"), {"error_class": "model_not_found"}),
    ("404 digits no status", E("HTTP 404"), {"error_class": "model_not_found"}),
    (
        "body code model_not_found",
        E("x", status=400, body={"error": {"code": "model_not_found"}}),
        {"error_class": "model_not_found"},
    ),
    # 403 / model access.
    (
        "403 status",
        E("API error 403: Forbidden", status=403),
        {"error_class": "forbidden", "skip_model": True, "cooldown": C.TIER},
    ),
    ("forbidden word", E("forbidden"), {"error_class": "forbidden", "cooldown": C.TIER}),
    ("403 digits no status", E("status 403"), {"error_class": "forbidden"}),
    (
        "400 access phrase",
        E("user is not allowed to access model kat-coder", status=400),
        {"error_class": "forbidden", "skip_model": True, "cooldown": C.TIER},
    ),
    ("plan gate phrase", E("action plan limited"), {"error_class": "forbidden"}),
    # api error 400 | 422.
    (
        "api error 400",
        E("API error 400: unsupported parameter: logprobs", status=400),
        {
            "error_class": "provider_bad_request",
            "provider_bad_request": True,
            "skip_model": False,
            "skip_provider": False,
        },
    ),
    (
        "api error 400 no status",
        E("API error 400: bad"),
        {"error_class": "provider_bad_request", "provider_bad_request": True},
    ),
    (
        "api error 422 no status",
        E("API error 422: bad"),
        {"error_class": "provider_bad_request", "provider_bad_request": True},
    ),
    # 402 / credits.
    (
        "402 status",
        E("API error 402: Payment required", status=402),
        {"error_class": "out_of_credits", "cooldown": C.CREDIT, "skip_model": False},
    ),
    (
        "insufficient credits",
        E("Insufficient credits"),
        {"error_class": "out_of_credits", "cooldown": C.CREDIT},
    ),
    ("insufficient balance", E("Insufficient Balance", status=402), {"error_class": "out_of_credits"}),
    (
        "openai insufficient_quota 429",
        E("insufficient_quota", status=429),
        {"error_class": "out_of_credits", "rate_limit_signal": True},
    ),
    (
        "anthropic credit balance 400",
        E("Your credit balance is too low to access the API", status=400),
        {"error_class": "out_of_credits"},
    ),
    ("stated 402 no status", E("API error 402: x"), {"error_class": "out_of_credits"}),
    # Daily quota.
    (
        "cloudflare daily allocation",
        E("API error 429: you have used up your daily free allocation of 10,000 neurons", status=429),
        {"error_class": "daily_quota_exhausted", "cooldown": C.DAILY, "rate_limit_signal": True},
    ),
    (
        "openrouter per-day",
        E("Rate limit exceeded: free-models-per-day", status=429),
        {"error_class": "daily_quota_exhausted"},
    ),
    (
        "groq rpd",
        E("Rate limit reached on requests per day (RPD): Limit 1000", status=429),
        {"error_class": "daily_quota_exhausted"},
    ),
    ("today quota", E("quota for today is exhausted"), {"error_class": "daily_quota_exhausted"}),
    (
        "groq upsell 'today' is not a daily quota",
        E(
            "API error 429: Rate limit reached for model `llama-3.3-70b-versatile` on tokens per minute (TPM): "
            "Limit 6000, Used 5000, Requested 1500. Please try again in 4.5s. Need more tokens? Upgrade to Dev "
            "Tier today at https://console.groq.com/settings/billing",
            status=429,
        ),
        {"error_class": "rate_limited", "cooldown": C.TRANSIENT, "retry_after_s": 4.5},
    ),
    (
        "gemini per-day metric",
        E(
            "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, "
            "quotaId: GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            status=429,
        ),
        {"error_class": "daily_quota_exhausted", "cooldown": C.DAILY},
    ),
    (
        "gemini per-minute metric is not daily",
        E("Quota exceeded, quotaId: GenerateRequestsPerMinutePerProjectPerModel-FreeTier", status=429),
        {"error_class": "rate_limited", "cooldown": C.TRANSIENT},
    ),
    (
        "too large per day is too large, not daily",
        E("Request too large for model `x` on tokens per day (TPD): Limit 100000", status=413),
        {"error_class": "context_too_large", "cooldown": C.NONE},
    ),
    # Synthetic dead-turn markers.
    (
        "empty completion",
        E("empty completion"),
        {
            "error_class": "empty_completion",
            "skip_bench": False,
            "skip_model": False,
            "cooldown": C.TRANSIENT,
        },
    ),
    (
        "empty completion length",
        E("empty completion (finish_reason=length)", skip_bench=True),
        {"error_class": "empty_completion", "skip_bench": True, "skip_model": False},
    ),
    (
        "ignored response_format",
        E("model ignored response_format"),
        {"error_class": "format_ignored", "skip_bench": True, "skip_model": True, "skip_provider": False},
    ),
    (
        "truncated json",
        E("truncated json at max_tokens"),
        {"error_class": "format_ignored", "skip_bench": True, "skip_model": True},
    ),
    (
        "in-band provider error",
        E("in-band provider error: boom"),
        {"error_class": "error", "skip_provider": False},
    ),
    (
        "stream ended unexpectedly",
        E("stream ended unexpectedly (no [DONE], no finish_reason)"),
        {"error_class": "error"},
    ),
    (
        "stream stalled",
        E("stream stalled: no data for 90s"),
        {"error_class": "timeout", "skip_provider": True},
    ),
    ("no first byte", E("no first byte after 60s"), {"error_class": "timeout", "skip_provider": True}),
    (
        "unparseable dialect",
        E("unparseable inline tool-call dialect"),
        {"error_class": "error", "skip_model": False},
    ),
    (
        "invalid tool arguments",
        E("invalid tool arguments from groq (set_timeout: missing city)"),
        {
            "error_class": "invalid_tool_arguments",
            "skip_bench": True,
            "skip_model": True,
            "skip_provider": False,
        },
    ),
    # Structured markers from the thrower.
    (
        "skip_model flag",
        E("whatever the model did", skip_model=True),
        {"skip_model": True, "skip_provider": False},
    ),
    (
        "skip_model beats timeout text",
        E("tool set_timeout failed", skip_model=True),
        {"skip_provider": False},
    ),
    ("skip_bench flag", E("odd dead turn", skip_bench=True), {"skip_bench": True}),
]


@pytest.mark.parametrize(("name", "err", "expected"), RETRYABLE_CASES, ids=[c[0] for c in RETRYABLE_CASES])
def test_retryable(name: str, err: UpstreamError, expected: dict[str, Any]) -> None:
    f = classify(err)
    assert f.kind is K.RETRYABLE
    check(f, expected)


FATAL_CASES = [
    ("bare 400", E("unsupported parameter: logprobs", status=400)),
    ("bare 400 with digits", E("Error code: 400 - invalid value", status=400)),
    ("bare 400 digits 500 in text", E("max_tokens must be <= 500", status=400)),
    ("418", E("I'm a teapot", status=418)),
    ("no status unknown", E("something odd happened")),
    ("terminated is whole-message only", E("your account has been terminated")),
    ("402 digits inside a number", E("Limit 30000, Requested 34026 tokens used 14023")),
]


@pytest.mark.parametrize(("name", "err"), FATAL_CASES, ids=[c[0] for c in FATAL_CASES])
def test_fatal(name: str, err: UpstreamError) -> None:
    f = classify(err)
    check(
        f,
        {
            "kind": K.FATAL,
            "cooldown": C.NONE,
            "skip_model": False,
            "skip_provider": False,
            "skip_bench": False,
            "provider_bad_request": False,
        },
    )


# ── Trail class precedence ───────────────────────────────────────────────────────────────────────

PRECEDENCE_CASES = [
    # auth beats everything
    (E("Unauthorized: rate limit", status=None), "auth"),
    # out_of_credits beats daily quota and rate limit
    (E("insufficient credits for your daily quota", status=429), "out_of_credits"),
    # daily beats model_not_found
    (E("daily limit exhausted; model not found", status=429), "daily_quota_exhausted"),
    # model_not_found beats forbidden
    (E("API error 403: model not found", status=403), "model_not_found"),
    # forbidden beats context too large
    (E("forbidden: prompt is too long", status=403), "forbidden"),
    # context too large beats provider_bad_request
    (E("API error 400: maximum context length exceeded", status=400), "context_too_large"),
    # degraded beats provider_bad_request (counts as upstream_error)
    (E("API error 400: degraded", status=400), "upstream_error"),
    # provider_bad_request beats empty completion
    (E("API error 400: empty completion", status=400), "provider_bad_request"),
    # empty completion beats format_ignored
    (E("empty completion; ignored response_format"), "empty_completion"),
    # format_ignored beats invalid tool arguments
    (E("ignored response_format; invalid tool arguments"), "format_ignored"),
    # invalid tool arguments beats timeout
    (E("invalid tool arguments: timeout field"), "invalid_tool_arguments"),
    # timeout beats rate limited
    (E("rate limit check timed out"), "timeout"),
    # rate limited beats upstream_error
    (E("rate limit", status=503), "rate_limited"),
    # upstream_error beats error
    (E("x", status=500), "upstream_error"),
    (E("nothing recognisable", skip_bench=True), "error"),
]


@pytest.mark.parametrize(
    ("err", "cls"), PRECEDENCE_CASES, ids=[c[1] + ":" + c[0].message for c in PRECEDENCE_CASES]
)
def test_trail_class_precedence(err: UpstreamError, cls: str) -> None:
    assert classify(err).error_class == cls


def test_error_classes_listed_in_precedence_order() -> None:
    assert ERROR_CLASSES[0] == "auth"
    assert ERROR_CLASSES[-1] == "error"
    assert len(ERROR_CLASSES) == 14


def test_every_class_is_known() -> None:
    for _, err, _ in RETRYABLE_CASES:
        assert classify(err).error_class in ERROR_CLASSES


# ── Skip-provider rules ──────────────────────────────────────────────────────────────────────────

SKIP_PROVIDER_CASES = [
    (E("x", status=500), True),
    (E("x", status=599), True),
    (E("degraded", status=400), True),
    (E("timeout", status=None), True),
    (E("aborted", status=None), True),
    (E("econnrefused", status=None), True),
    (E("fetch failed", status=None), True),
    (E("x", transport=True), True),
    (E("x", timeout=True), True),
    # with a status, timeout wording is not provider-level
    (E("timeout", status=429), False),
    (E("x", status=429), False),
    (E("x", status=404), False),
    (E("x", status=403), False),
    (E("Insufficient credits", status=402), False),
    # a model-scoped failure is never provider health
    (E("x", status=500, skip_model=True), False),
]


@pytest.mark.parametrize(
    ("err", "skip"), SKIP_PROVIDER_CASES, ids=[f"{c[0].status}:{c[0].message}" for c in SKIP_PROVIDER_CASES]
)
def test_skip_provider(err: UpstreamError, skip: bool) -> None:
    assert classify(err).skip_provider is skip


# ── Cause chain ──────────────────────────────────────────────────────────────────────────────────


def _raised_from(cause: BaseException) -> UpstreamError:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise UpstreamError("upstream request failed") from inner
    except UpstreamError as outer:
        return outer


class ServerDisconnectedError(Exception):
    """Stand-in named like aiohttp's."""


@pytest.mark.parametrize(
    ("cause", "cls"),
    [
        (ConnectionResetError("reset"), "upstream_error"),
        (BrokenPipeError(), "upstream_error"),
        (OSError(errno.ECONNREFUSED, "refused"), "upstream_error"),
        (ServerDisconnectedError("x"), "upstream_error"),
        (TimeoutError(), "timeout"),
        (RuntimeError("socket hang up"), "upstream_error"),
    ],
)
def test_cause_chain(cause: BaseException, cls: str) -> None:
    f = classify(_raised_from(cause))
    assert f.kind is K.RETRYABLE
    assert f.error_class == cls
    assert f.skip_provider


def test_cause_chain_is_bounded_and_cycle_safe() -> None:
    a = RuntimeError("a")
    b = RuntimeError("b")
    a.__cause__ = b
    b.__cause__ = a
    err = UpstreamError("wrapped")
    err.__cause__ = a
    assert classify(err).kind is K.FATAL

    deep: BaseException = ConnectionResetError("deep")
    for i in range(10):
        wrapper = RuntimeError(f"level {i}")
        wrapper.__cause__ = deep
        deep = wrapper
    err2 = UpstreamError("wrapped")
    err2.__cause__ = deep
    assert classify(err2).kind is K.FATAL  # deeper than 5 links: not looked at


def test_unrelated_cause_stays_fatal() -> None:
    assert classify(_raised_from(ValueError("bad json"))).kind is K.FATAL


# ── Retry hints ──────────────────────────────────────────────────────────────────────────────────

RETRY_HINT_CASES: list[tuple[str, UpstreamError, float | None]] = [
    ("explicit", E("x", status=429, retry_after_s=12.0), 12.0),
    (
        "explicit wins over body",
        E("try again in 5s", status=429, retry_after_s=12.0, body={"retry_after": 3}),
        12.0,
    ),
    ("explicit capped", E("x", status=429, retry_after_s=10e6), 86400.0),
    ("explicit non-positive ignored", E("x", status=429, retry_after_s=0.0), None),
    (
        "gemini retryDelay",
        E("x", status=429, body={"error": {"details": [{"@type": "RetryInfo", "retryDelay": "17s"}]}}),
        17.0,
    ),
    (
        "gemini fractional retryDelay",
        E("x", status=429, body={"error": {"details": [{"retryDelay": "0.5s"}]}}),
        0.5,
    ),
    ("retry_after number", E("x", status=429, body={"error": {"retry_after": 30}}), 30.0),
    ("retry_after string", E("x", status=429, body={"retry_after": "17s"}), 17.0),
    ("body as json text", E("x", status=429, body='{"error":{"details":[{"retryDelay":"42s"}]}}'), 42.0),
    ("body as bytes", E("x", status=429, body=b'{"retry_after": 9}'), 9.0),
    ("body as non-json text", E("x", status=429, body='retryDelay: "8s" and more'), 8.0),
    ("openai prose", E("Rate limit reached. Please try again in 20s.", status=429), 20.0),
    ("openai ms prose", E("Please try again in 120ms.", status=429), 0.12),
    ("groq prose", E("Please try again in 7m12.5s. Need more tokens?", status=429), 432.5),
    ("gemini prose", E("Please retry in 1.5s.", status=429), 1.5),
    ("words", E("retry after 30 seconds", status=429), 30.0),
    ("minutes words", E("try again in 2 minutes", status=429), 120.0),
    ("hours", E("try again in 1h", status=429), 3600.0),
    ("quoted json in message", E('API error 429: {"retryDelay": "33s"}', status=429), 33.0),
    ("prose capped", E("try again in 48h", status=429), 86400.0),
    ("none", E("Rate limit", status=429), None),
]


@pytest.mark.parametrize(("name", "err", "hint"), RETRY_HINT_CASES, ids=[c[0] for c in RETRY_HINT_CASES])
def test_retry_hint(name: str, err: UpstreamError, hint: float | None) -> None:
    got = classify(err).retry_after_s
    if hint is None:
        assert got is None
    else:
        assert got == pytest.approx(hint)


PARSE_RETRY_AFTER_CASES: list[tuple[str, float, float | None]] = [
    ("120", 0.0, 120.0),
    (" 7 ", 0.0, 7.0),
    ("1.5", 0.0, 1.5),
    ("0", 0.0, 0.0),
    ("-1", 0.0, None),
    ("nan", 0.0, None),
    ("", 0.0, None),
    ("soon", 0.0, None),
    ("999999", 0.0, 86400.0),
    # Wed, 21 Oct 2015 07:28:00 GMT == 1445412480
    ("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0 - 90.0, 90.0),
    ("Wed, 21 Oct 2015 07:28:00 -0000", 1445412480.0 - 30.0, 30.0),
    ("Wed, 21 Oct 2015 07:28:00 +0100", 1445412480.0 - 3600.0 - 10.0, 10.0),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0 + 100.0, 0.0),  # in the past
    ("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0 - 10 * 86400.0, 86400.0),  # capped
]


@pytest.mark.parametrize(("value", "now", "expected"), PARSE_RETRY_AFTER_CASES)
def test_parse_retry_after(value: str, now: float, expected: float | None) -> None:
    got = parse_retry_after(value, now)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected)


# ── Message redaction and other fields ───────────────────────────────────────────────────────────


def test_message_is_redacted_and_capped() -> None:
    key = "sk-live-abcdefghijklmnopqrstuvwxyz123456"
    f = classify(E(f"API error 401: Incorrect API key provided: {key} " + "x" * 400, status=401))
    assert key not in f.message
    assert len(f.message) <= 240


def test_message_redacts_given_secrets() -> None:
    f = classify(E("bad key plainsecret42 used", status=429), secrets=["plainsecret42"])
    assert "plainsecret42" not in f.message


def test_http_error_message() -> None:
    assert http_error_message(400, "bad") == "API error 400: bad"
    assert http_error_message(503, "") == "API error 503"
    f = classify(E(http_error_message(400, "unsupported parameter"), status=400))
    assert f.kind is K.RETRYABLE
    assert f.provider_bad_request


def test_failure_is_frozen() -> None:
    f = classify(E("x", status=500))
    with pytest.raises(AttributeError):
        f.kind = K.FATAL  # type: ignore[misc]
