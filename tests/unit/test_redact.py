"""Credential redaction of upstream text."""

from __future__ import annotations

import pytest

from freellm.engine.redact import redact

# (id, text, secret that must disappear, text that must survive)
CASES: list[tuple[str, str, str, str]] = [
    (
        "openai sk",
        "Incorrect API key provided: sk-proj-abcdefgh12345678XYZ.",
        "sk-proj-abcdefgh12345678XYZ",
        "Incorrect API key provided",
    ),
    (
        "anthropic sk-ant",
        "key sk-ant-api03-AAAAAAAAAAAAAAAAAAAA rejected",
        "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA",
        "rejected",
    ),
    ("openrouter sk-or", "sk-or-v1-0123456789abcdef", "sk-or-v1-0123456789abcdef", ""),
    ("groq gsk", "Invalid API Key gsk_abcdefghIJKLMNOP1234", "gsk_abcdefghIJKLMNOP1234", "Invalid API Key"),
    (
        "google AIza",
        "key AIzaSyA-1234567890abcdefghijklmnopqrs is bad",
        "AIzaSyA-1234567890abcdefghijklmnopqrs",
        "is bad",
    ),
    ("xai", "xai-ABCDEFGH12345678 expired", "xai-ABCDEFGH12345678", "expired"),
    ("nvidia", "nvapi-abcdefghijklmnop_QRST-1234 denied", "nvapi-abcdefghijklmnop_QRST-1234", "denied"),
    ("huggingface", "token hf_abcdefghijklmnopqrstu", "hf_abcdefghijklmnopqrstu", ""),
    (
        "github",
        "ghp_abcdefghijklmnopqrstuvwxyz012345 and github_pat_11ABCDEFG0123456789",
        "ghp_abcdefghijklmnopqrstuvwxyz012345",
        "",
    ),
    (
        "bearer",
        "Authorization: Bearer abc.def-ghi_jkl~mno",
        "abc.def-ghi_jkl~mno",
        "Authorization: Bearer [redacted]",
    ),
    ("basic", "Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "Basic [redacted]"),
    (
        "query key",
        "GET https://x.googleapis.com/v1/models/m:gen?key=SECRETVALUE&alt=sse failed",
        "SECRETVALUE",
        "&alt=sse failed",
    ),
    ("query api_key", "url ?api_key=hunter2hunter2 and", "hunter2hunter2", "and"),
    ("query token", "/v1?token=abcd1234", "abcd1234", "/v1?token=[redacted]"),
    ("json api_key", '{"api_key": "plaintextsecret", "model": "m"}', "plaintextsecret", '"model": "m"'),
    ("header x-api-key", "x-api-key: plainsecret99", "plainsecret99", "x-api-key: [redacted]"),
    ("password", "password=hunter2", "hunter2", "password=[redacted]"),
    (
        "jwt",
        "token eyJhbGciOiJIUzI1NiJ9xx.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        "",
    ),
    (
        "bare 32+ token",
        "key 0123456789abcdef0123456789abcdef01 bad",
        "0123456789abcdef0123456789abcdef01",
        "bad",
    ),
]


@pytest.mark.parametrize(("name", "text", "gone", "kept"), CASES, ids=[c[0] for c in CASES])
def test_patterns(name: str, text: str, gone: str, kept: str) -> None:
    out = redact(text, limit=None)
    assert gone not in out
    assert kept in out


SURVIVES = [
    "Rate limit reached for model llama-3.3-70b-versatile in organization org_01hx on tokens per minute (TPM)",
    "max_tokens=100 is above the limit",
    "Please try again in 7m12.5s.",
    "The model `meta-llama/Llama-3.3-70B-Instruct-Turbo` does not exist",
    "See https://console.groq.com/docs/rate-limits for details",
    "task-manager-assistant-extended is not a model",
    "a" * 40,
    "Missing required key: messages",
]


@pytest.mark.parametrize("text", SURVIVES)
def test_ordinary_text_survives(text: str) -> None:
    assert redact(text, limit=None) == text


def test_given_secrets_removed() -> None:
    out = redact("used key plain-key-42 and again plain-key-42", ["plain-key-42"], limit=None)
    assert "plain-key-42" not in out
    assert out == "used key [redacted] and again [redacted]"


def test_longest_secret_first() -> None:
    out = redact("k=abcd1234-extra", ["abcd1234", "abcd1234-extra"], limit=None)
    assert "extra" not in out


def test_short_and_empty_secrets_ignored() -> None:
    assert redact("abc is fine", ["", "ab", "abc"], limit=None) == "abc is fine"


def test_whitespace_collapsed() -> None:
    assert redact("  a\n\n b\t c  ") == "a b c"


LIMITS = [
    ("x" * 240, 240, "x" * 240),
    ("x" * 241, 240, "x" * 237 + "..."),
    ("x" * 500, 10, "x" * 7 + "..."),
    ("word " * 100, 20, "word word word word..."[:20]),
    ("abcdef", 3, "abc"),
    ("abcdef", None, "abcdef"),
]


@pytest.mark.parametrize(("text", "limit", "expected"), LIMITS)
def test_limit(text: str, limit: int | None, expected: str) -> None:
    out = redact(text, limit=limit)
    if limit is not None:
        assert len(out) <= limit
    if text.startswith("word"):
        assert out.endswith("...")
    else:
        assert out == expected


def test_default_limit_is_240() -> None:
    assert len(redact("y" * 1000)) == 240


def test_idempotent() -> None:
    text = "Bearer sk-abcdefghijklmnop key=AIzaSyA-1234567890abcdefghijklmnopqrs"
    once = redact(text, limit=None)
    assert redact(once, limit=None) == once
