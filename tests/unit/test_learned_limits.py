"""Learned limits: a stated limit fills a missing one or lowers one, never raises a configured one;
header readings replace, text readings only lower; spent windows become blocks; dump/load."""

from __future__ import annotations

import calendar

import orjson
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from freellm.config import ModelLimits
from freellm.routing.catalog import ModelRoute
from freellm.routing.learned import (
    LearnedLimits,
    WindowBlock,
    blocks_from_headers,
    blocks_from_text,
    has_rate_limit_headers,
    readings,
    text_limits,
)
from freellm.routing.ratelimit_headers import Axis, WindowReading

DAY = 86_400.0
# 2026-12-03 08:00:00 UTC and the UTC midnight after it
NOW = float(calendar.timegm((2026, 12, 3, 8, 0, 0)))
MIDNIGHT = float(calendar.timegm((2026, 12, 4, 0, 0, 0)))


def route(limits: ModelLimits | None = None, provider: str = "p", model: str = "m") -> ModelRoute:
    return ModelRoute(
        provider=provider,
        model=model,
        label=f"{provider}/{model}",
        context_window=None,
        tools=True,
        vision=False,
        enabled=True,
        limits=limits if limits is not None else ModelLimits(rpm=2),
        is_local=False,
    )


def R(
    axis: Axis, limit: int | None = None, remaining: int | None = None, reset_at: float | None = None
) -> WindowReading:
    return WindowReading(axis=axis, limit=limit, remaining=remaining, reset_at=reset_at)


# ---- the rule ---------------------------------------------------------------------------------


def test_configured_limit_is_never_raised_by_headers() -> None:
    book = LearnedLimits()
    r = route(ModelLimits(rpm=2))
    assert book.learn_headers(r, [R("rpm", limit=10, remaining=9)]) is True
    assert book.effective(r).rpm == 2
    assert book.learned(r.label) == {"rpm": 10}  # what was said is kept; the merge keeps the lower


def test_missing_limit_is_filled_then_replaced_by_headers_and_lowered_by_text() -> None:
    book = LearnedLimits()
    r = route(ModelLimits())
    assert book.learn_headers(r, [R("rpm", limit=10)]) is True
    assert book.effective(r).rpm == 10
    assert book.learn_headers(r, [R("rpm", limit=5)]) is True  # headers replace
    assert book.effective(r).rpm == 5
    assert book.learn_text(r, [("rpm", 3)]) is True  # text lowers
    assert book.effective(r).rpm == 3
    assert book.learn_text(r, [("rpm", 8)]) is False  # text never raises
    assert book.effective(r).rpm == 3


def test_headers_may_raise_an_earlier_learned_value_but_not_a_configured_one() -> None:
    book = LearnedLimits()
    r = route(ModelLimits(rpd=100))
    book.learn_text(r, [("rpm", 3), ("rpd", 50)])
    assert book.effective(r) == ModelLimits(rpm=3, rpd=50)
    book.learn_headers(r, [R("rpm", limit=30), R("rpd", limit=1000)])
    assert book.effective(r) == ModelLimits(rpm=30, rpd=100)


def test_a_lower_stated_limit_lowers_a_configured_one() -> None:
    book = LearnedLimits()
    r = route(ModelLimits(rpm=30, tpm=10_000))
    book.learn_text(r, [("tpm", 6000)])
    assert book.effective(r) == ModelLimits(rpm=30, tpm=6000)


def test_axes_are_independent() -> None:
    book = LearnedLimits()
    r = route(ModelLimits(rpm=2, tpd=1_000_000))
    book.learn_headers(r, [R("rpm", limit=1), R("tpm", limit=6000), R("rpd", limit=1000)])
    assert book.effective(r) == ModelLimits(rpm=1, rpd=1000, tpm=6000, tpd=1_000_000)
    assert book.learned(r.label) == {"rpm": 1, "tpm": 6000, "rpd": 1000}


# ---- learn's small rules ------------------------------------------------------------------------------


def test_effective_is_the_routes_own_limits_when_nothing_was_learned() -> None:
    book = LearnedLimits()
    r = route(ModelLimits(rpm=2))
    assert book.effective(r) is r.limits
    book.learn_headers(r, [R("rpm", limit=None, remaining=0, reset_at=NOW + 5)])  # no limit stated
    book.learn_text(r, [])
    assert book.learn(r, "rpm", 0) is False
    assert book.learn(r, "rpm", -5) is False
    assert book.effective(r) is r.limits
    assert book.learned(r.label) == {}


def test_learning_one_route_leaves_the_others_alone() -> None:
    book = LearnedLimits()
    a, b = route(provider="a"), route(provider="b")
    book.learn(a, "rpm", 1)
    assert book.effective(a).rpm == 1
    assert book.effective(b) is b.limits


def test_learn_reports_whether_anything_changed() -> None:
    book = LearnedLimits()
    r = route(ModelLimits())
    assert book.learn(r, "tpm", 6000) is True
    assert book.learn(r, "tpm", 6000) is False
    assert book.learn(r, "tpm", 6000, only_lower=True) is False
    assert book.learn(r, "tpm", 7000, only_lower=True) is False
    assert book.learn(r, "tpm", 5000, only_lower=True) is True
    assert book.learn(r, "tpm", 7000) is True
    assert book.learned(r.label) == {"tpm": 7000}


def test_text_fills_a_missing_learned_value() -> None:
    book = LearnedLimits()
    r = route(ModelLimits())
    assert book.learn_text(r, [("rpd", 14_400)]) is True
    assert book.effective(r).rpd == 14_400


def test_learned_returns_a_copy() -> None:
    book = LearnedLimits()
    r = route()
    book.learn(r, "rpm", 1)
    copy = book.learned(r.label)
    copy["rpm"] = 99
    assert book.learned(r.label) == {"rpm": 1}


# ---- dump and load --------------------------------------------------------------------------------------


def test_dump_load_round_trip() -> None:
    a = route(ModelLimits(rpm=30), provider="groq", model="Llama-3")
    b = route(ModelLimits(), provider="cerebras", model="qwen")
    book = LearnedLimits()
    book.learn_headers(a, [R("rpm", limit=10), R("tpd", limit=500_000)])
    book.learn_text(b, [("rpd", 100)])
    raw = book.dump()
    assert orjson.loads(raw) == {"groq/Llama-3": {"rpm": 10, "tpd": 500_000}, "cerebras/qwen": {"rpd": 100}}

    restored = LearnedLimits()
    restored.load(raw, {a.label.lower(): a, b.label.lower(): b})  # the catalog's by_label is lowercased
    assert restored.learned(a.label) == {"rpm": 10, "tpd": 500_000}
    assert restored.learned(b.label) == {"rpd": 100}
    assert restored.effective(a) == ModelLimits(rpm=10, tpd=500_000)
    assert restored.effective(b) == ModelLimits(rpd=100)
    assert restored.dump() == raw


def test_load_never_raises_a_configured_limit() -> None:
    r = route(ModelLimits(rpm=2))
    book = LearnedLimits()
    book.load(orjson.dumps({"p/m": {"rpm": 10}}).decode(), {"p/m": r})
    assert book.effective(r).rpm == 2


@pytest.mark.parametrize("raw", [None, "", "not json", "[1, 2]", '"p/m"', "42", "null", "{"])
def test_load_ignores_unreadable_documents(raw: str | None) -> None:
    r = route()
    book = LearnedLimits()
    book.load(raw, {"p/m": r})
    assert book.learned("p/m") == {}
    assert book.effective(r) is r.limits


def test_load_drops_unknown_routes_and_junk_values() -> None:
    r = route(ModelLimits())
    raw = orjson.dumps(
        {
            "gone/model": {"rpm": 5},
            "p/m": {
                "rpm": 7,
                "rpd": True,  # a bool is not a count
                "tpm": "6000",
                "tpd": 1.5,
                "rps": 3,  # not an axis
            },
            "P/M2": ["rpm", 1],
        }
    ).decode()
    book = LearnedLimits()
    book.load(raw, {"p/m": r, "p/m2": route(provider="p", model="m2")})
    assert book.learned("p/m") == {"rpm": 7}
    assert book.learned("gone/model") == {}
    assert book.learned("p/m2") == {}
    assert book.effective(r) == ModelLimits(rpm=7)


def test_load_ignores_non_positive_values() -> None:
    r = route(ModelLimits())
    book = LearnedLimits()
    book.load('{"p/m": {"rpm": 0, "tpm": -1}}', {"p/m": r})
    assert book.learned("p/m") == {}
    assert book.effective(r) is r.limits


def test_load_matches_labels_case_insensitively() -> None:
    r = route(ModelLimits(), provider="groq", model="llama")
    book = LearnedLimits()
    book.load('{"GROQ/Llama": {"rpm": 4}}', {"groq/llama": r})
    assert book.effective(r).rpm == 4


# ---- blocks from headers --------------------------------------------------------------------------------


def test_a_spent_window_blocks_until_its_reset() -> None:
    blocks = blocks_from_headers([R("rpm", limit=30, remaining=0, reset_at=NOW + 12.5)], NOW)
    assert blocks == [WindowBlock("rpm", NOW + 12.5)]


def test_negative_remaining_counts_as_spent() -> None:
    assert blocks_from_headers([R("tpm", remaining=-3, reset_at=NOW + 1)], NOW) == [
        WindowBlock("tpm", NOW + 1)
    ]


def test_a_reset_exactly_a_day_away_is_believed() -> None:
    assert blocks_from_headers([R("rpd", remaining=0, reset_at=NOW + DAY)], NOW) == [
        WindowBlock("rpd", NOW + DAY)
    ]


@pytest.mark.parametrize(
    "reading",
    [
        R("rpm", limit=30, remaining=1, reset_at=NOW + 10),  # something left
        R("rpm", limit=30, remaining=None, reset_at=NOW + 10),  # unknown remaining
        R("rpm", limit=30, remaining=0, reset_at=None),  # no reset
        R("rpm", limit=30, remaining=0, reset_at=NOW - 1),  # a past reset
        R("rpm", limit=30, remaining=0, reset_at=NOW),  # resetting now
        R("rpd", limit=30, remaining=0, reset_at=NOW + DAY + 1),  # further than a day: not believed
    ],
)
def test_no_block_without_a_spent_window_and_a_believable_reset(reading: WindowReading) -> None:
    assert blocks_from_headers([reading], NOW) == []


def test_only_spent_windows_block() -> None:
    windows = [
        R("rpm", limit=30, remaining=12, reset_at=NOW + 30),
        R("tpm", limit=6000, remaining=0, reset_at=NOW + 7),
        R("rpd", limit=1000, remaining=0, reset_at=NOW + 3600),
    ]
    assert blocks_from_headers(windows, NOW) == [WindowBlock("tpm", NOW + 7), WindowBlock("rpd", NOW + 3600)]
    assert blocks_from_headers([], NOW) == []


# ---- blocks from 429 text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("axis", "until"), [("rpm", NOW + 60), ("tpm", NOW + 60), ("rpd", MIDNIGHT), ("tpd", MIDNIGHT)]
)
def test_a_stated_limit_blocks_for_the_rest_of_its_window(axis: Axis, until: float) -> None:
    assert blocks_from_text([(axis, 5)], NOW) == [WindowBlock(axis, until)]


def test_a_daily_block_at_midnight_lasts_until_the_next_midnight() -> None:
    assert blocks_from_text([("rpd", 5)], MIDNIGHT) == [WindowBlock("rpd", MIDNIGHT + DAY)]
    assert blocks_from_text([("tpd", 5)], MIDNIGHT - 0.5) == [WindowBlock("tpd", MIDNIGHT)]


def test_one_block_per_stated_limit() -> None:
    assert blocks_from_text([("rpm", 2), ("tpd", 9)], NOW) == [
        WindowBlock("rpm", NOW + 60),
        WindowBlock("tpd", MIDNIGHT),
    ]
    assert blocks_from_text([], NOW) == []


# ---- header detection and the parsing wrappers ---------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "X-RateLimit-Remaining-Requests",
        "x-ratelimit-remaining-tokens",
        "X-RATELIMIT-REMAINING",
        "X-Ratelimit-Remaining-Requests-Day",
        "x-ratelimit-remaining-tokens-minute",
        "Anthropic-Ratelimit-Requests-Remaining",
        "anthropic-ratelimit-tokens-remaining",
        "X-Ratelimit-Limit-Requests",
        "Anthropic-RateLimit-Requests-Limit",
    ],
)
def test_rate_limit_headers_are_found_case_insensitively(name: str) -> None:
    headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json", name: "5"})
    assert has_rate_limit_headers(headers)
    assert has_rate_limit_headers(CIMultiDictProxy(headers))


def test_answers_without_rate_limit_headers() -> None:
    assert not has_rate_limit_headers(CIMultiDict({"Content-Type": "application/json", "Retry-After": "3"}))
    assert not has_rate_limit_headers(CIMultiDict())
    assert not has_rate_limit_headers({})


def test_readings_parse_only_when_worth_it() -> None:
    assert readings(None, NOW) == []
    assert readings(CIMultiDict({"Retry-After": "3"}), NOW) == []
    headers = CIMultiDict(
        {
            "X-RateLimit-Limit-Requests": "30",
            "X-RateLimit-Remaining-Requests": "0",
            "X-RateLimit-Reset-Requests": "2s",
        }
    )
    found = readings(headers, NOW)
    assert found == [R("rpm", limit=30, remaining=0, reset_at=NOW + 2)]
    assert blocks_from_headers(found, NOW) == [WindowBlock("rpm", NOW + 2)]


def test_text_limits_reads_a_429_message() -> None:
    message = "Rate limit reached for model `llama` in organization `org` on requests per minute (RPM): Limit 2, Used 2"
    assert text_limits(message) == [("rpm", 2)]
    assert text_limits("Too many requests") == []
