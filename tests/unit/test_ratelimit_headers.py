"""Rate-limit headers and 429 text: every provider spelling, the duration grammar, bad values ignored."""

from __future__ import annotations

import calendar
import math
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from freellm.routing.ratelimit_headers import (
    Axis,
    WindowReading,
    parse_duration_s,
    parse_limit_text,
    parse_rate_limit_headers,
)

# 2026-12-03 08:00:00 UTC
NOW = float(calendar.timegm((2026, 12, 3, 8, 0, 0)))


def R(axis: Axis, limit: int | None, remaining: int | None, reset_at: float | None) -> WindowReading:
    return WindowReading(axis=axis, limit=limit, remaining=remaining, reset_at=reset_at)


def parse(headers: Mapping[str, str], now: float = NOW) -> list[WindowReading]:
    return parse_rate_limit_headers(headers, now)


def approx_readings(readings: list[WindowReading]) -> list[tuple[Axis, int | None, int | None, object]]:
    """Readings with reset_at wrapped in pytest.approx (float arithmetic on durations)."""
    return [
        (r.axis, r.limit, r.remaining, None if r.reset_at is None else pytest.approx(r.reset_at, abs=1e-6))
        for r in readings
    ]


def check(headers: Mapping[str, str], expected: list[WindowReading]) -> None:
    assert approx_readings(parse(headers)) == approx_readings(expected)


# ------------------------------------------------------------------------------------ parse_duration_s


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20.0),
        ("1m30s", 90.0),
        ("250ms", 0.25),
        ("2m59.56s", 179.56),
        ("1h2m3s", 3723.0),
        ("6m0s", 360.0),
        ("17", 17.0),
        ("0.5", 0.5),
        ("0", 0.0),
        ("0s", 0.0),
        ("1m", 60.0),
        ("2h", 7200.0),
        ("1.5h", 5400.0),
        ("7.66s", 7.66),
        ("1s500ms", 1.5),
        ("33011.382867", 33011.382867),
        ("  20s  ", 20.0),
        ("20S", 20.0),
        ("1m 30s", 90.0),
        ("1d", 86400.0),
        ("5us", 5e-6),
        ("5\u00b5s", 5e-6),
        ("100ns", 1e-7),
        (".5", 0.5),
    ],
)
def test_duration_grammar(text: str, seconds: float) -> None:
    got = parse_duration_s(text)
    assert got is not None
    assert got == pytest.approx(seconds, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "-1",
        "-1s",
        "-1m30s",
        "soon",
        "NaN",
        "nan",
        "inf",
        "Infinity",
        "1e3",
        "s",
        "m",
        "ms",
        "1x",
        "30s1m",  # units out of order
        "1m1m",  # a unit twice
        "1.2.3s",
        "20 seconds",
        "0x10",
        "\u0663\u0660s",  # non-ASCII digits
        "9" * 400,  # too long to be a header value
        "9" * 300 + "h",
    ],
)
def test_duration_rejects(text: str) -> None:
    assert parse_duration_s(text) is None


def test_duration_is_always_finite_or_none() -> None:
    got = parse_duration_s("9" * 60)
    assert got is not None and math.isfinite(got)


# --------------------------------------------------------------------------------- OpenAI / Groq family


def test_openai_minute_windows() -> None:
    check(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-limit-tokens": "30000",
            "x-ratelimit-remaining-tokens": "29900",
            "x-ratelimit-reset-tokens": "1m0s",  # exactly 60 s is still a minute window
        },
        [R("rpm", 500, 499, NOW + 0.12), R("tpm", 30000, 29900, NOW + 60.0)],
    )


def test_groq_requests_are_daily_tokens_per_minute() -> None:
    # Groq's documented example: requests headers describe RPD, tokens headers TPM.
    check(
        {
            "X-RateLimit-Limit-Requests": "14400",
            "X-RateLimit-Remaining-Requests": "14370",
            "X-RateLimit-Reset-Requests": "2m59.56s",
            "X-RateLimit-Limit-Tokens": "18000",
            "X-RateLimit-Remaining-Tokens": "17997",
            "X-RateLimit-Reset-Tokens": "7.66s",
            "Retry-After": "2",
        },
        [R("rpd", 14400, 14370, NOW + 179.56), R("tpm", 18000, 17997, NOW + 7.66)],
    )


@pytest.mark.parametrize(
    ("reset", "axis", "offset"),
    [
        ("60", "tpm", 60.0),
        ("60.01", "tpd", 60.01),
        ("61s", "tpd", 61.0),
        ("1h", "tpd", 3600.0),
        ("59s", "tpm", 59.0),
        ("0s", "tpm", 0.0),
    ],
)
def test_daily_rule_for_tokens(reset: str, axis: Axis, offset: float) -> None:
    check(
        {"x-ratelimit-limit-tokens": "100", "x-ratelimit-reset-tokens": reset},
        [R(axis, 100, None, NOW + offset)],
    )


def test_openai_without_reset_defaults_to_minute_axes() -> None:
    check(
        {"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-tokens": "0"},
        [R("rpm", 60, None, None), R("tpm", None, 0, None)],
    )


def test_openai_unreadable_reset_keeps_counts_and_minute_axis() -> None:
    check(
        {
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "12",
            "x-ratelimit-reset-requests": "soon",
        },
        [R("rpm", 60, 12, None)],
    )


# ------------------------------------------------------------------------------------------- Cerebras


def test_cerebras_explicit_windows() -> None:
    check(
        {
            "x-ratelimit-limit-requests-day": "14400",
            "x-ratelimit-remaining-requests-day": "14399",
            "x-ratelimit-reset-requests-day": "33011.382867",
            "x-ratelimit-limit-tokens-minute": "60000",
            "x-ratelimit-remaining-tokens-minute": "59500",
            "x-ratelimit-reset-tokens-minute": "11.382867",
        },
        [R("rpd", 14400, 14399, NOW + 33011.382867), R("tpm", 60000, 59500, NOW + 11.382867)],
    )


def test_cerebras_all_four_suffixes_axis_from_suffix_not_reset() -> None:
    # The suffix names the window: a short reset does not turn a "-day" window into a minute one.
    check(
        {
            "x-ratelimit-limit-requests-minute": "30",
            "x-ratelimit-reset-requests-minute": "5",
            "x-ratelimit-limit-requests-day": "900",
            "x-ratelimit-reset-requests-day": "5",
            "x-ratelimit-limit-tokens-minute": "6000",
            "x-ratelimit-limit-tokens-day": "1000000",
            "x-ratelimit-reset-tokens-day": "86000.5",
        },
        [
            R("rpm", 30, None, NOW + 5),
            R("rpd", 900, None, NOW + 5),
            R("tpm", 6000, None, None),
            R("tpd", 1000000, None, NOW + 86000.5),
        ],
    )


# ----------------------------------------------------------------------------------------- OpenRouter


@pytest.mark.parametrize(
    ("reset", "axis", "reset_at"),
    [
        (str(int((NOW + 30) * 1000)), "rpm", NOW + 30),  # epoch ms, 30 s away
        (str(int((NOW + 3600) * 1000)), "rpd", NOW + 3600),  # epoch ms, an hour away
        (str(int(NOW + 30)), "rpm", NOW + 30),  # epoch seconds
        (str(int(NOW + 7200)), "rpd", NOW + 7200),
        (f"{NOW + 12.5:.1f}", "rpm", NOW + 12.5),  # fractional epoch seconds
        (str(10**11), "rpm", 10**11 / 1000),  # the threshold itself is milliseconds (1973: in the past)
        (str(10**11 - 1), "rpd", float(10**11 - 1)),  # just below: seconds (far future)
    ],
)
def test_openrouter_epoch_ms_and_s(reset: str, axis: Axis, reset_at: float) -> None:
    check(
        {"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "19", "X-RateLimit-Reset": reset},
        [R(axis, 20, 19, reset_at)],
    )


def test_openrouter_past_reset_is_still_reported() -> None:
    past_ms = str(int((NOW - 3600) * 1000))
    check({"x-ratelimit-limit": "50", "x-ratelimit-reset": past_ms}, [R("rpm", 50, None, NOW - 3600)])


def test_openrouter_without_reset() -> None:
    check({"x-ratelimit-remaining": "0"}, [R("rpm", None, 0, None)])


# ------------------------------------------------------------------------------------------ Anthropic


def test_anthropic_every_family_is_its_own_reading() -> None:
    check(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": "2026-12-03T08:00:30Z",
            "anthropic-ratelimit-tokens-limit": "100000",
            "anthropic-ratelimit-tokens-remaining": "98000",
            "anthropic-ratelimit-tokens-reset": "2026-12-03T08:00:05Z",
            "anthropic-ratelimit-input-tokens-limit": "80000",
            "anthropic-ratelimit-input-tokens-remaining": "79000",
            "anthropic-ratelimit-input-tokens-reset": "2026-12-03T08:00:02Z",
            "anthropic-ratelimit-output-tokens-limit": "16000",
            "anthropic-ratelimit-output-tokens-remaining": "15000",
            "anthropic-ratelimit-output-tokens-reset": "2026-12-03T08:00:10Z",
        },
        [
            R("rpm", 50, 49, NOW + 30),
            R("tpm", 100000, 98000, NOW + 5),
            R("tpm", 80000, 79000, NOW + 2),
            R("tpm", 16000, 15000, NOW + 10),
        ],
    )


@pytest.mark.parametrize(
    ("stamp", "reset_at"),
    [
        ("2026-12-03T08:00:30Z", NOW + 30),
        ("2026-12-03t08:00:30z", NOW + 30),
        ("2026-12-03 08:00:30Z", NOW + 30),
        ("2026-12-03T08:00:30+00:00", NOW + 30),
        ("2026-12-03T09:00:30+01:00", NOW + 30),
        ("2026-12-03T13:30:30+05:30", NOW + 30),
        ("2026-12-03T03:00:30-05:00", NOW + 30),
        ("2026-12-03T08:00:30.5Z", NOW + 30.5),
        ("2026-12-03T08:00:30.123456789Z", NOW + 30.123456789),
        ("2026-12-03T09:00:30.250+01:00", NOW + 30.25),
        ("2026-12-03T07:59:00Z", NOW - 60),  # already past: still reported
        ("2026-12-31T23:59:60Z", float(calendar.timegm((2027, 1, 1, 0, 0, 0)))),  # leap second
    ],
)
def test_anthropic_rfc3339_variants(stamp: str, reset_at: float) -> None:
    check({"Anthropic-RateLimit-Requests-Reset": f" {stamp} "}, [R("rpm", None, None, reset_at)])


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-12-03",  # a date only
        "2026-12-03T08:00:30",  # no offset
        "2026-13-03T08:00:30Z",  # month 13
        "2026-02-30T08:00:30Z",  # no such day
        "2026-12-03T24:00:00Z",
        "2026-12-03T08:61:00Z",
        "2026-12-03T08:00:30+25:00",
        "0000-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",  # before datetime.min once the offset is applied
        "9999-12-31T23:59:59-01:00",  # after datetime.max
        "Tue, 03 Dec 2026 08:00:30 GMT",  # an HTTP date is not what Anthropic sends
        "1733212830",
        "soon",
    ],
)
def test_anthropic_bad_dates_are_ignored(stamp: str) -> None:
    check(
        {"anthropic-ratelimit-tokens-limit": "1000", "anthropic-ratelimit-tokens-reset": stamp},
        [R("tpm", 1000, None, None)],
    )


# ------------------------------------------------------------------------- case and mapping flavours

MIXED = {
    "X-RATELIMIT-LIMIT-REQUESTS": "30",
    "x-RateLimit-Remaining-Requests": "29",
    "x-ratelimit-reset-requests": "2s",
    "Anthropic-Ratelimit-Output-Tokens-Limit": "8000",
}
MIXED_EXPECTED = [R("rpm", 30, 29, NOW + 2), R("tpm", 8000, None, None)]


def test_plain_dict_mixed_case() -> None:
    check(MIXED, MIXED_EXPECTED)


def test_cimultidict_and_proxy() -> None:
    md: CIMultiDict[str] = CIMultiDict(MIXED)
    check(md, MIXED_EXPECTED)
    check(CIMultiDictProxy(md), MIXED_EXPECTED)


def test_repeated_header_first_value_wins() -> None:
    md: CIMultiDict[str] = CIMultiDict()
    md.add("x-ratelimit-limit-requests", "30")
    md.add("X-RateLimit-Limit-Requests", "99")
    check(md, [R("rpm", 30, None, None)])


def test_no_rate_limit_headers() -> None:
    assert parse({}) == []
    assert parse({"content-type": "application/json", "retry-after": "30"}) == []


def test_every_provider_at_once_in_order() -> None:
    readings = parse(
        {
            "x-ratelimit-limit-tokens": "1",
            "x-ratelimit-limit-requests-day": "2",
            "x-ratelimit-limit": "3",
            "anthropic-ratelimit-requests-limit": "4",
            "x-ratelimit-limit-requests": "5",
        }
    )
    assert [(r.axis, r.limit) for r in readings] == [
        ("rpm", 5),
        ("tpm", 1),
        ("rpd", 2),
        ("rpm", 3),
        ("rpm", 4),
    ]


# -------------------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    "bad",
    [
        "-1",
        "soon",
        "",
        "   ",
        "NaN",
        "inf",
        "1e5",
        "0x10",
        "12 34",
        "ten",
        "9" * 100,
        "+-1",
        "½",
        "\u0663\u0660",
    ],
)
def test_bad_values_are_ignored_and_do_not_hide_others(bad: str) -> None:
    headers = {
        # a bad value in every position of every family...
        "x-ratelimit-limit-requests": bad,
        "x-ratelimit-remaining-requests": "7",
        "x-ratelimit-reset-requests": "30s",
        "x-ratelimit-limit-tokens": "6000",
        "x-ratelimit-remaining-tokens": bad,
        "x-ratelimit-reset-tokens": bad,
        "x-ratelimit-limit-tokens-minute": bad,
        "x-ratelimit-remaining-tokens-minute": bad,
        "x-ratelimit-reset-tokens-minute": "10",
        "x-ratelimit-limit": "20",
        "x-ratelimit-remaining": bad,
        "x-ratelimit-reset": bad,
        "anthropic-ratelimit-requests-limit": bad,
        "anthropic-ratelimit-requests-remaining": "3",
        "anthropic-ratelimit-requests-reset": bad,
        # ...and a family made only of bad values yields no reading at all.
        "anthropic-ratelimit-output-tokens-limit": bad,
        "anthropic-ratelimit-output-tokens-remaining": bad,
        "anthropic-ratelimit-output-tokens-reset": bad,
    }
    check(
        headers,
        [
            R("rpm", None, 7, NOW + 30),
            R("tpm", 6000, None, None),
            R("tpm", None, None, NOW + 10),
            R("rpm", 20, None, None),
            R("rpm", None, 3, None),
        ],
    )


@pytest.mark.parametrize(
    ("value", "count"), [(" 42 ", 42), ("+42", 42), ("42.0", 42), ("99.9", 99), ("0", 0)]
)
def test_count_spellings(value: str, count: int) -> None:
    check({"x-ratelimit-remaining-requests": value}, [R("rpm", None, count, None)])


def test_non_string_keys_and_values_are_skipped() -> None:
    weird: dict[object, object] = {
        1: "2",
        "x-ratelimit-limit-requests": 30,
        "x-ratelimit-remaining-requests": None,
        "x-ratelimit-limit-tokens": "100",
    }
    assert parse(weird) == [R("tpm", 100, None, None)]  # type: ignore[arg-type]


def test_past_relative_reset_cannot_happen_but_past_epoch_is_kept() -> None:
    # Relative resets are never negative (rejected), so only absolute ones can lie in the past.
    check({"x-ratelimit-reset-requests": "-5s"}, [])
    check(
        {"anthropic-ratelimit-requests-reset": "2020-01-01T00:00:00Z"}, [R("rpm", None, None, 1577836800.0)]
    )


def test_reading_is_frozen() -> None:
    reading = R("rpm", 1, 1, None)
    with pytest.raises(AttributeError):
        reading.limit = 2  # type: ignore[misc]


# ---------------------------------------------------------------------------------- parse_limit_text


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Rate limit reached for model `llama` in organization `org_x` service tier `on_demand` on tokens "
            "per minute (TPM): Limit 6000, Used 5800, Requested 400. Please try again in 4s.",
            [("tpm", 6000)],
        ),
        (
            "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_x` service tier "
            "`on_demand` on requests per day (RPD): Limit 1000, Used 1000, Requested 1.",
            [("rpd", 1000)],
        ),
        (
            "Rate limit reached for model `x` on tokens per day (TPD): Limit 100000, Used 99000, Requested 2000.",
            [("tpd", 100000)],
        ),
        (
            "Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 3, Used 3, "
            "Requested 1.",
            [("rpm", 3)],
        ),
        ("Rate limit exceeded: limit: 2 requests per minute", [("rpm", 2)]),
        ("You exceeded your current quota: limit: 50 requests per day", [("rpd", 50)]),
        ("limit=30 RPM", [("rpm", 30)]),
        ("Too many tokens: limit 10000 tokens/min", [("tpm", 10000)]),
        (
            "Quota exceeded for metric: generate_content_free_tier_requests, limit: 15, model: gemini. "
            "quotaId: GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            [("rpm", 15)],
        ),
        (
            "Quota exceeded for metric: generate_content_free_tier_requests, limit: 15, model: gemini (PerMinute)",
            [("rpm", 15)],
        ),
        (
            "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, "
            "limit: 200, model: gemini-2.5-flash [GenerateRequestsPerDayPerProjectPerModel-FreeTier]",
            [("rpd", 200)],
        ),
        (
            "* Quota exceeded for metric: x/generate_content_free_tier_input_token_count, limit: 250000, model: g\n"
            "* Quota exceeded for metric: x/generate_content_free_tier_requests, limit: 10, model: g\n"
            "quotaIds: GenerateContentInputTokensPerModelPerMinute-FreeTier, "
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            [("tpm", 250000), ("rpd", 10)],
        ),
        (
            "This request would exceed your organization's rate limit of 50,000 input tokens per minute.",
            [("tpm", 50000)],
        ),
        ("limit: 2 requests per minute, limit: 50 requests per day", [("rpm", 2), ("rpd", 50)]),
        ("requests_per_day quota: limit: 1000", [("rpd", 1000)]),
        ("daily request limit: 500", [("rpd", 500)]),
        ("RPM limit 5; RPM limit 5", [("rpm", 5)]),  # duplicates once
    ],
)
def test_limit_text_examples(message: str, expected: list[tuple[Axis, int]]) -> None:
    assert parse_limit_text(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        "",
        "This model's maximum context length is 8192 tokens; you exceeded the limit of the context window",
        "Rate limit exceeded: limit: 100, try again later",  # a number but no axis
        "Too many requests: limit 100",  # a kind but no window
        "limit reached, 20 requests per minute",  # the number is not the limit's
        "Rate limit reached for requests per minute",  # an axis but no number
        "limit: 0 requests per minute",  # absurd: zero
        f"limit: {10**12 + 1} requests per day",  # absurd: too big
        f"limit: {'9' * 5000} requests per day",  # absurd and longer than int() accepts
        "limit: 1.5 requests per minute",  # not a count
        "limit: -5 requests per minute",
        "limits 20 requests per minute",  # "limits", not "limit"
        "Internal server error",
    ],
)
def test_limit_text_negatives(message: str) -> None:
    assert parse_limit_text(message) == []


def test_limit_text_upper_bound_is_inclusive() -> None:
    assert parse_limit_text(f"limit: {10**12} tokens per day") == [("tpd", 10**12)]


# ------------------------------------------------------------------------------------------ hypothesis

HEADER_NAMES = [
    f"x-ratelimit-{part}-{kind}{suffix}"
    for part in ("limit", "remaining", "reset")
    for kind in ("requests", "tokens")
    for suffix in ("", "-minute", "-day")
] + [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    *(
        f"anthropic-ratelimit-{family}-{part}"
        for family in ("requests", "tokens", "input-tokens", "output-tokens")
        for part in ("limit", "remaining", "reset")
    ),
]
VALUES = st.one_of(
    st.text(max_size=40),
    st.from_regex(r"-?\d{1,20}(\.\d{0,10})?", fullmatch=True),
    st.from_regex(r"(\d{1,4}h)?(\d{1,4}m)?(\d{1,4}(\.\d{1,3})?s)?(\d{1,4}ms)?", fullmatch=True),
    st.from_regex(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})", fullmatch=True),
)
KEYS = st.one_of(
    st.sampled_from(HEADER_NAMES),
    st.sampled_from(HEADER_NAMES).map(str.upper),
    st.text(max_size=30),
)


@settings(max_examples=400, deadline=None)
@given(
    headers=st.dictionaries(KEYS, VALUES, max_size=12), now=st.floats(allow_nan=False, allow_infinity=False)
)
def test_headers_never_raise(headers: dict[str, str], now: float) -> None:
    readings = parse_rate_limit_headers(headers, now)
    for r in readings:
        assert r.axis in ("rpm", "rpd", "tpm", "tpd")
        assert r.limit is not None or r.remaining is not None or r.reset_at is not None
        assert r.limit is None or r.limit >= 0
        assert r.remaining is None or r.remaining >= 0
    assert parse_rate_limit_headers(CIMultiDict(headers), now) == readings


@settings(max_examples=400, deadline=None)
@given(text=st.text(max_size=80))
def test_duration_never_raises(text: str) -> None:
    got = parse_duration_s(text)
    assert got is None or (math.isfinite(got) and got >= 0)


WORDS = st.sampled_from(
    [
        "limit",
        "Limit",
        "limit:",
        "limit=",
        "of",
        "requests",
        "tokens",
        "per",
        "minute",
        "day",
        "RPM",
        "TPD",
        "PerMinute",
        "PerDay",
        "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
        "_requests",
        "\n",
        ",",
        "0",
        "15",
        "6,000",
        "-3",
        "1.5",
        "9999999999999",
    ]
)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(max_size=200), st.lists(WORDS, max_size=25).map(" ".join)))
def test_limit_text_never_raises(text: str) -> None:
    for axis, value in parse_limit_text(text):
        assert axis in ("rpm", "rpd", "tpm", "tpd")
        assert 0 < value <= 10**12
