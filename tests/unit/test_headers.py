"""Response header values (spec §6): encoding, trail, detail and the routing header set."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from freellm.errors import TrailEntry
from freellm.server.headers import (
    detail_header,
    encode_header_value,
    routing_headers,
    trail_header,
)

ENCODE = [
    ("groq/llama-3.3-70b-versatile", "groq/llama-3.3-70b-versatile"),
    ("a b", "a b"),  # SP kept
    ("~!@#$^&*()_+`-=[]{}|;':\",./<>?", "~!@#$^&*()_+`-=[]{}|;':\",./<>?"),  # visible ASCII kept
    ("100%", "100%25"),  # '%' itself encoded
    ("%41", "%2541"),  # so an existing escape stays unambiguous
    ("a\r\nX-Evil: 1", "a%0D%0AX-Evil: 1"),  # header injection
    ("tab\there", "tab%09here"),
    ("nul\x00", "nul%00"),
    ("del\x7f", "del%7F"),
    ("café", "caf%C3%A9"),
    ("模型", "%E6%A8%A1%E5%9E%8B"),
    ("😀", "%F0%9F%98%80"),  # astral: one 4-byte sequence
    ("lone\ud800", "lone%EF%BF%BD"),  # lone surrogate → U+FFFD
    ("", ""),
]


@pytest.mark.parametrize(("value", "expected"), ENCODE)
def test_encode_header_value(value: str, expected: str) -> None:
    assert encode_header_value(value) == expected


@pytest.mark.parametrize("value", ["groq/m", "100% ok", "café/模型 😀", "a\r\nb", "x%y%z"])
def test_encoding_round_trips(value: str) -> None:
    assert unquote(encode_header_value(value)) == value


def test_fast_path_returns_same_object() -> None:
    v = "groq/llama-3.3-70b-versatile"
    assert encode_header_value(v) is v


CAP = [
    ("a" * 300, 256, "a" * 256),
    ("a" * 10, 10, "a" * 10),
    ("a" * 9 + "é", 10, "a" * 9),  # the 6-char escape does not fit: dropped, never split
    ("a" * 4 + "é", 10, "a" * 4 + "%C3%A9"),
    ("a" * 5 + "é", 10, "a" * 5),
    ("%" * 5, 10, "%25%25%25"),
    ("😀x", 12, "%F0%9F%98%80"),
    ("😀x", 11, ""),
]


@pytest.mark.parametrize(("value", "max_len", "expected"), CAP)
def test_cap_never_splits_an_escape(value: str, max_len: int, expected: str) -> None:
    out = encode_header_value(value, max_len)
    assert out == expected
    assert len(out) <= max_len


def test_every_output_char_is_safe() -> None:
    value = "".join(chr(c) for c in range(0, 0x300))
    out = encode_header_value(value, 100_000)
    assert all(" " <= ch <= "~" for ch in out)
    assert unquote(out) == value


# ── Trail ────────────────────────────────────────────────────────────────────────────────────────


def T(
    n: int, cls: str = "rate_limited", provider: str = "groq", model: str = "m1", **kw: object
) -> TrailEntry:
    return TrailEntry(provider, model, n, cls, **kw)  # type: ignore[arg-type]


def test_trail_header() -> None:
    trail = [T(1, "rate_limited", "groq", "m1"), T(2, "timeout", "google", "m2")]
    assert trail_header(trail) == "groq/m1 key1=rate_limited; google/m2 key2=timeout"


def test_trail_header_ten_then_more() -> None:
    trail = [T(i) for i in range(1, 14)]
    value = trail_header(trail)
    assert value.count("key") == 10
    assert value.endswith("groq/m1 key10=rate_limited; +3 more")


def test_trail_header_exactly_ten_has_no_more() -> None:
    assert "more" not in trail_header([T(i) for i in range(1, 11)])


def test_trail_header_capped_at_1024() -> None:
    trail = [T(i, model="m" * 200) for i in range(1, 11)]
    assert len(trail_header(trail)) <= 1024


def test_trail_header_encodes_model_ids() -> None:
    assert trail_header([T(1, model="modèle")]) == "groq/mod%C3%A8le key1=rate_limited"


# ── Detail ───────────────────────────────────────────────────────────────────────────────────────


def test_detail_header() -> None:
    trail = [
        T(1, "rate_limited", message="API error 429: slow down; later", started_ms=0, duration_ms=120),
        T(2, "timeout", "google", "m2", started_ms=125, duration_ms=60000),
    ]
    assert detail_header(trail) == (
        "groq/m1 key1=rate_limited t=0+120ms msg=API error 429: slow down, later; "
        "google/m2 key2=timeout t=125+60000ms"
    )


def test_detail_message_capped_at_120_and_redacted() -> None:
    key = "gsk_ABCDEFGHIJKLMNOPQRSTUVWX"
    entry = T(1, message=f"bad key {key} " + "z" * 300, started_ms=5, duration_ms=6)
    value = detail_header([entry])
    assert key not in value
    msg = value.split("msg=", 1)[1]
    assert len(msg) == 120


def test_detail_header_more_and_cap() -> None:
    trail = [T(i, message="m" * 120, started_ms=i, duration_ms=1) for i in range(1, 15)]
    value = detail_header(trail)
    assert len(value) <= 2048
    short = detail_header([T(i) for i in range(1, 15)])
    assert short.endswith("; +4 more")


# ── Routing headers ──────────────────────────────────────────────────────────────────────────────


def test_routing_headers_success_without_failover() -> None:
    assert routing_headers("groq/llama", [], detail=True, max_len=256) == {"X-Routed-Via": "groq/llama"}


def test_routing_headers_cache_hit() -> None:
    assert routing_headers("cache", [], detail=False, max_len=256) == {"X-Routed-Via": "cache"}


def test_routing_headers_with_trail() -> None:
    trail = [T(1, message="boom", started_ms=0, duration_ms=10)]
    h = routing_headers("google/m2", trail, detail=False, max_len=256)
    assert h == {
        "X-Routed-Via": "google/m2",
        "X-Fallback-Attempts": "1",
        "X-Fallback-Trail": "groq/m1 key1=rate_limited",
    }
    h2 = routing_headers("google/m2", trail, detail=True, max_len=256)
    assert h2["X-Fallback-Detail"] == "groq/m1 key1=rate_limited t=0+10ms msg=boom"


def test_routing_headers_on_exhaustion() -> None:
    trail = [T(i) for i in range(1, 4)]
    h = routing_headers(None, trail, detail=False, max_len=256)
    assert "X-Routed-Via" not in h
    assert h["X-Fallback-Attempts"] == "3"


def test_routing_headers_routed_via_capped_and_encoded() -> None:
    h = routing_headers("p/" + "é" * 100, [], detail=False, max_len=32)
    assert len(h["X-Routed-Via"]) <= 32
    assert h["X-Routed-Via"].startswith("p/%C3%A9")
