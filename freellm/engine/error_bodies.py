"""Reading upstream error bodies: retry hints (``Retry-After``, ``retryDelay``, prose) and error codes.

Bodies arrive in every shape (JSON objects, JSON quoted into text, plain text), so the walk is bounded
in depth and nodes. Pure: ``now`` is a parameter.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Iterator
from datetime import UTC
from typing import Any, Final

import orjson

__all__ = [
    "MAX_RETRY_AFTER_S",
    "body_codes",
    "cap_hint",
    "decode_body",
    "parse_retry_after",
    "retry_hint_from_body",
    "retry_hint_from_text",
    "walk_body",
]

MAX_RETRY_AFTER_S: Final = 86400.0

# ── Retry hints ───────────────────────────────────────────────────────────────────────────────────

# Body fields carrying a retry delay: Gemini error.details[RetryInfo].retryDelay "17s"; OpenAI-style
# relays' retry_after (seconds); some Chinese hosts' retryAfter.
RETRY_BODY_KEYS: Final = frozenset(
    {"retryDelay", "retry_delay", "retry_after", "retryAfter", "retry_after_seconds"}
)
# Longer spellings first, so "minutes" is not read as "m" + "inutes".
_UNIT_ALTS = r"milliseconds?|ms|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s"
_UNIT = r"(?:" + _UNIT_ALTS + r")"
_DURATION_TOKEN: Final = re.compile(r"(\d+(?:\.\d+)?)\s*(" + _UNIT_ALTS + r")?", re.IGNORECASE)
# OpenAI "Please try again in 20s" / "in 6ms"; Groq "Please try again in 7m12.5s"; Gemini
# "Please retry in 17.390264s"; relays "retry after 30 seconds".
RETRY_PROSE: Final = re.compile(
    r"(?:try again|retry)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*" + _UNIT + r"?\s*)+)", re.IGNORECASE
)
RETRY_BODY_TEXT: Final = re.compile(
    r"[\"']?(?:retryDelay|retry_delay|retry_after|retryAfter)[\"']?\s*[:=]\s*[\"']?(\d+(?:\.\d+)?\s*"
    + _UNIT
    + r"?)",
    re.IGNORECASE,
)
_BODY_MAX_DEPTH: Final = 6
_BODY_MAX_NODES: Final = 500


def walk_body(body: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a decoded JSON body, depth- and size-bounded."""
    stack: list[tuple[Any, int]] = [(body, 0)]
    nodes = 0
    while stack and nodes < _BODY_MAX_NODES:
        node, depth = stack.pop()
        nodes += 1
        if depth > _BODY_MAX_DEPTH:
            continue
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(k, str):
                    yield k, v
                if isinstance(v, dict | list):
                    stack.append((v, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))


def decode_body(body: Any) -> Any:
    if isinstance(body, bytes | bytearray | memoryview | str):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
    return body


def _parse_duration(text: str) -> float | None:
    """``"17s"``, ``"7m12.5s"``, ``"500ms"``, ``"30 seconds"``, ``"17"`` (seconds) → seconds."""
    total = 0.0
    found = False
    for m in _DURATION_TOKEN.finditer(text):
        value = float(m.group(1))
        unit = (m.group(2) or "s").lower()
        if unit.startswith("ms") or unit.startswith("milli"):
            value /= 1000.0
        elif unit.startswith("h"):
            value *= 3600.0
        elif unit.startswith("m"):
            value *= 60.0
        total += value
        found = True
    return total if found else None


def cap_hint(seconds: float | None) -> float | None:
    if seconds is None or math.isnan(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def retry_hint_from_body(body: Any) -> float | None:
    decoded = decode_body(body)
    for key, value in walk_body(decoded):
        if key not in RETRY_BODY_KEYS:
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            return cap_hint(float(value))
        if isinstance(value, str):
            hint = cap_hint(_parse_duration(value))
            if hint is not None:
                return hint
    if decoded is None and isinstance(body, str):
        m = RETRY_BODY_TEXT.search(body)
        if m:
            return cap_hint(_parse_duration(m.group(1)))
    return None


def retry_hint_from_text(message: str) -> float | None:
    m = RETRY_PROSE.search(message)
    if m:
        return cap_hint(_parse_duration(m.group(1)))
    m = RETRY_BODY_TEXT.search(message)  # a JSON body quoted into the message
    if m:
        return cap_hint(_parse_duration(m.group(1)))
    return None


def body_codes(body: Any) -> frozenset[str]:
    decoded = decode_body(body)
    return frozenset(
        v.lower()
        for k, v in walk_body(decoded)
        if k in ("code", "type", "status", "reason") and isinstance(v, str)
    )


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value (delta-seconds or an HTTP date).

    ``now`` is epoch seconds. A date in the past gives 0; anything unparseable gives None. Capped at
    24 h.
    """
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # "-0000" or no zone: RFC 9110 dates are UTC
            when = when.replace(tzinfo=UTC)
        ts = when.timestamp()
        return min(max(ts - now, 0.0), MAX_RETRY_AFTER_S)
    if math.isnan(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)
