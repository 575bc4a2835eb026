"""Rate-limit facts read from upstream response headers and from 429 error text.

Why: the router should skip a key *before* the provider answers 429, and it should learn a key's real
limits instead of trusting the catalog. Most providers tell us both on every response; they just spell
it differently:

* **OpenAI, Groq and most OpenAI-compatible servers** send ``x-ratelimit-{limit,remaining,reset}-requests``
  and the same three with ``-tokens``. The reset is a Go-style duration (``20s``, ``1m30s``,
  ``250ms``, ``2m59.56s``) or bare seconds. OpenAI's requests window is per minute; Groq's is per *day*
  (its docs show ``x-ratelimit-reset-requests: 2m59.56s`` next to a 14 400 limit). The headers do not
  say which, so a reset more than 60 s away marks the window as daily (``rpd``/``tpd``), else it is a
  minute window (``rpm``/``tpm``).
* **Cerebras** names the window: ``x-ratelimit-{limit,remaining,reset}-requests-day`` and
  ``-tokens-minute`` (reset in seconds, as a float, e.g. ``33011.382867``). ``-requests-minute`` and
  ``-tokens-day`` are read too.
* **OpenRouter** sends ``x-ratelimit-{limit,remaining,reset}`` for requests, the reset being epoch
  *milliseconds* (epoch seconds are accepted as well: a value below 10**11 is seconds). Per minute
  unless the reset is more than 60 s away (the free tier's daily cap), then per day.
* **Anthropic** sends ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}`` with RFC 3339 resets (``2026-12-03T08:00:30Z``). All of them are per-minute
  windows; each token family is its own reading (the tightest one is what binds).

When the 429 arrives anyway its *text* often states the limit (the reference gateway's "limit
learning"): Groq/OpenAI ``... on tokens per minute (TPM): Limit 6000, Used 5800, Requested 400``,
Gemini ``Quota exceeded for metric: ..._requests, limit: 15`` with a quotaId such as
``GenerateRequestsPerMinutePerProjectPerModel-FreeTier``, generic ``limit: 50 requests per day``.
:func:`parse_limit_text` reads those.

Everything here is pure: no I/O, no clock (``now`` is a parameter), never raises on provider input; a
value that does not parse is ignored and the other readings are still returned.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

__all__ = [
    "Axis",
    "WindowReading",
    "parse_duration_s",
    "parse_limit_text",
    "parse_rate_limit_headers",
]

Axis = Literal["rpm", "rpd", "tpm", "tpd"]

# A window whose reset is further away than this is a daily one (Groq's ``-requests`` headers).
_MINUTE_WINDOW_MAX_S: Final = 60.0
# Epoch values at or above this are milliseconds (10**11 s is the year 5138; 10**11 ms is 1973).
_EPOCH_MS_THRESHOLD: Final = 10**11
# Limits stated in error text outside (0, this] are absurd and ignored.
_MAX_TEXT_LIMIT: Final = 10**12
# Longer header values / duration strings are not something any provider sends: ignored outright.
_MAX_VALUE_LEN: Final = 64


@dataclass(frozen=True, slots=True)
class WindowReading:
    """One rate-limit window as an upstream described it."""

    axis: Axis
    limit: int | None  # the window's size as the provider states it (None: not given / unreadable)
    remaining: int | None  # what is left in it (None: not given / unreadable)
    reset_at: float | None  # epoch seconds when it refills (None: not given / unreadable)


# --------------------------------------------------------------------------------------------- values

_INT_RE: Final = re.compile(r"\+?(\d{1,18})(?:\.\d*)?", re.ASCII)
_NUMBER_RE: Final = re.compile(r"\+?(?:\d{1,30}(?:\.\d*)?|\.\d+)", re.ASCII)
_DURATION_RE: Final = re.compile(
    r"""
    (?:(?P<d>\d+(?:\.\d+)?)\s*d\s*)?
    (?:(?P<h>\d+(?:\.\d+)?)\s*h\s*)?
    (?:(?P<m>\d+(?:\.\d+)?)\s*m(?![a-z])\s*)?
    (?:(?P<s>\d+(?:\.\d+)?)\s*s\s*)?
    (?:(?P<ms>\d+(?:\.\d+)?)\s*ms\s*)?
    (?:(?P<us>\d+(?:\.\d+)?)\s*(?:us|\u00b5s|\u03bcs)\s*)?
    (?:(?P<ns>\d+(?:\.\d+)?)\s*ns\s*)?
    """,
    re.VERBOSE | re.ASCII,
)
_DURATION_UNITS: Final = (
    ("d", 86400.0),
    ("h", 3600.0),
    ("m", 60.0),
    ("s", 1.0),
    ("ms", 1e-3),
    ("us", 1e-6),
    ("ns", 1e-9),
)
_BARE_SECONDS_RE: Final = re.compile(r"\d+(?:\.\d*)?|\.\d+", re.ASCII)
_RFC3339_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))",
    re.ASCII,
)


def _clean(value: object) -> str | None:
    """A header value, stripped, or None when it is not a short string."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or len(text) > _MAX_VALUE_LEN:
        return None
    return text


def _parse_count(value: object) -> int | None:
    """A non-negative count (``"14400"``; a fractional one is floored: ``"99.5"`` -> 99)."""
    text = _clean(value)
    if text is None:
        return None
    match = _INT_RE.fullmatch(text)
    return int(match.group(1)) if match else None


def _parse_number(value: object) -> float | None:
    """A non-negative, finite decimal number (no exponent, no sign, no NaN/inf)."""
    text = _clean(value)
    if text is None or not _NUMBER_RE.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def parse_duration_s(text: str) -> float | None:
    """Seconds in a Go-style duration or a bare number; None when it is not one.

    ``'20s'`` -> 20, ``'1m30s'`` -> 90, ``'250ms'`` -> 0.25, ``'2m59.56s'`` -> 179.56, ``'1h2m3s'``
    -> 3723, ``'6m0s'`` -> 360, ``'17'`` -> 17, ``'0.5'`` -> 0.5. Units ``d h m s ms us ns`` in that
    order, each at most once. Negative values, ``'soon'``, ``''``, ``'NaN'``, ``'inf'`` -> None.
    """
    if not isinstance(text, str):
        return None
    cleaned = text.strip().lower()
    if not cleaned or len(cleaned) > _MAX_VALUE_LEN:
        return None
    if _BARE_SECONDS_RE.fullmatch(cleaned):
        seconds = float(cleaned)
        return seconds if math.isfinite(seconds) else None
    match = _DURATION_RE.fullmatch(cleaned)
    if match is None:
        return None
    total = 0.0
    seen = False
    for group, scale in _DURATION_UNITS:
        part = match.group(group)
        if part is not None:
            seen = True
            total += float(part) * scale
    if not seen or not math.isfinite(total):
        return None
    return total


def _parse_rfc3339(value: object) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (``Z`` or ``±hh:mm`` offset, optional fraction)."""
    text = _clean(value)
    if text is None:
        return None
    match = _RFC3339_RE.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = float("0" + match.group(7)) if match.group(7) else 0.0
    leap = second == 60  # RFC 3339 allows a leap second; datetime does not
    try:
        stamp = datetime(year, month, day, hour, minute, 59 if leap else second, tzinfo=UTC)
    except ValueError:
        return None
    offset_s = 0
    if match.group(9) is not None:
        off_h, off_m = int(match.group(10)), int(match.group(11))
        if off_h > 23 or off_m > 59:
            return None
        offset_s = (off_h * 3600 + off_m * 60) * (1 if match.group(9) == "+" else -1)
    # Local time = UTC + offset, so UTC = local - offset.
    try:
        epoch = (stamp - timedelta(seconds=offset_s)).timestamp()
    except (OverflowError, ValueError):  # year 1 with a positive offset, year 9999 with a negative one
        return None
    return epoch + fraction + (1.0 if leap else 0.0)


def _parse_epoch(value: object) -> float | None:
    """Epoch seconds from epoch milliseconds (OpenRouter) or epoch seconds (below 10**11)."""
    number = _parse_number(value)
    if number is None:
        return None
    return number / 1000.0 if number >= _EPOCH_MS_THRESHOLD else number


def _reset_in(value: object, now: float) -> tuple[float | None, float | None]:
    """(reset_at, seconds until then) for a relative duration header; (None, None) when unreadable."""
    if not isinstance(value, str):
        return None, None
    seconds = parse_duration_s(value)
    if seconds is None:
        return None, None
    return now + seconds, seconds


def _reading(
    axis: Axis, limit: int | None, remaining: int | None, reset_at: float | None
) -> WindowReading | None:
    if limit is None and remaining is None and reset_at is None:
        return None
    return WindowReading(axis=axis, limit=limit, remaining=remaining, reset_at=reset_at)


# -------------------------------------------------------------------------------------------- headers

# (kind, minute axis, day axis) for the OpenAI/Groq family, whose window is inferred from the reset.
_OPENAI_FAMILIES: Final[tuple[tuple[str, Axis, Axis], ...]] = (
    ("requests", "rpm", "rpd"),
    ("tokens", "tpm", "tpd"),
)
# Cerebras' explicit windows: header suffix -> axis.
_CEREBRAS_WINDOWS: Final[tuple[tuple[str, Axis], ...]] = (
    ("requests-minute", "rpm"),
    ("requests-day", "rpd"),
    ("tokens-minute", "tpm"),
    ("tokens-day", "tpd"),
)
# Anthropic families: header infix -> axis (all per-minute windows).
_ANTHROPIC_FAMILIES: Final[tuple[tuple[str, Axis], ...]] = (
    ("requests", "rpm"),
    ("tokens", "tpm"),
    ("input-tokens", "tpm"),
    ("output-tokens", "tpm"),
)


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names lower-cased once; the first value wins when a name repeats (multidicts)."""
    out: dict[str, str] = {}
    try:
        items = list(headers.items())
    except Exception:  # a hostile Mapping: nothing readable
        return out
    for key, value in items:
        if isinstance(key, str) and isinstance(value, str):
            out.setdefault(key.strip().lower(), value)
    return out


def _openai_style(h: Mapping[str, str], now: float) -> list[WindowReading]:
    readings: list[WindowReading] = []
    for kind, minute_axis, day_axis in _OPENAI_FAMILIES:
        reset_at, reset_in = _reset_in(h.get(f"x-ratelimit-reset-{kind}"), now)
        axis = day_axis if reset_in is not None and reset_in > _MINUTE_WINDOW_MAX_S else minute_axis
        reading = _reading(
            axis,
            _parse_count(h.get(f"x-ratelimit-limit-{kind}")),
            _parse_count(h.get(f"x-ratelimit-remaining-{kind}")),
            reset_at,
        )
        if reading is not None:
            readings.append(reading)
    return readings


def _cerebras_style(h: Mapping[str, str], now: float) -> list[WindowReading]:
    readings: list[WindowReading] = []
    for suffix, axis in _CEREBRAS_WINDOWS:
        reset_at, _ = _reset_in(h.get(f"x-ratelimit-reset-{suffix}"), now)
        reading = _reading(
            axis,
            _parse_count(h.get(f"x-ratelimit-limit-{suffix}")),
            _parse_count(h.get(f"x-ratelimit-remaining-{suffix}")),
            reset_at,
        )
        if reading is not None:
            readings.append(reading)
    return readings


def _openrouter_style(h: Mapping[str, str], now: float) -> list[WindowReading]:
    reset_at = _parse_epoch(h.get("x-ratelimit-reset"))
    daily = reset_at is not None and reset_at - now > _MINUTE_WINDOW_MAX_S
    reading = _reading(
        "rpd" if daily else "rpm",
        _parse_count(h.get("x-ratelimit-limit")),
        _parse_count(h.get("x-ratelimit-remaining")),
        reset_at,
    )
    return [] if reading is None else [reading]


def _anthropic_style(h: Mapping[str, str]) -> list[WindowReading]:
    readings: list[WindowReading] = []
    for family, axis in _ANTHROPIC_FAMILIES:
        prefix = f"anthropic-ratelimit-{family}-"
        reading = _reading(
            axis,
            _parse_count(h.get(prefix + "limit")),
            _parse_count(h.get(prefix + "remaining")),
            _parse_rfc3339(h.get(prefix + "reset")),
        )
        if reading is not None:
            readings.append(reading)
    return readings


def parse_rate_limit_headers(headers: Mapping[str, str], now: float) -> list[WindowReading]:
    """Every window the headers describe; [] when none.

    Header names are case-insensitive (a plain dict with any casing or an aiohttp
    ``CIMultiDictProxy``). Order: OpenAI/Groq (requests, tokens), Cerebras (requests-minute,
    requests-day, tokens-minute, tokens-day), OpenRouter, Anthropic (requests, tokens, input-tokens,
    output-tokens). A reset already before ``now`` is still reported. Never raises.
    """
    h = _lowered(headers)
    if not h:
        return []
    return [
        *_openai_style(h, now),
        *_cerebras_style(h, now),
        *_openrouter_style(h, now),
        *_anthropic_style(h),
    ]


# ----------------------------------------------------------------------------------------- error text

# "limit: 15", "Limit 6000", "limit=2", "limit of 50,000" followed by the number.
_LIMIT_RE: Final = re.compile(
    r"\blimit\b(?:\s*[:=]\s*|\s+of\s+|\s+)(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?![\d,]*\.\d)",
    re.IGNORECASE | re.ASCII,
)
_KIND_AXES: Final[Mapping[tuple[str, str], Axis]] = {
    ("request", "minute"): "rpm",
    ("request", "day"): "rpd",
    ("token", "minute"): "tpm",
    ("token", "day"): "tpd",
}
_ABBREVIATIONS: Final[Mapping[str, Axis]] = {"rpm": "rpm", "rpd": "rpd", "tpm": "tpm", "tpd": "tpd"}
_AXIS_KIND: Final[Mapping[str, str]] = {"rpm": "request", "rpd": "request", "tpm": "token", "tpd": "token"}
# Phrases naming both the kind and the window.
_AXIS_PHRASE_RES: Final = (
    # "requests per minute", "tokens per min", "requests/day"
    re.compile(r"\b(request|token)s?\s*(?:per\s+|/\s*)(minute|min|day)\b", re.IGNORECASE),
    # snake_case metric names: "requests_per_minute", "tokens_per_model_per_day"
    re.compile(r"(request|token)s?(?:_per_[a-z]+?)*?_per_(minute|day)(?![a-z])", re.IGNORECASE),
    # Gemini quotaIds: "GenerateRequestsPerMinutePerProjectPerModel", "InputTokensPerModelPerMinute"
    re.compile(r"(Request|Token)s?(?:Per[A-Z][a-z]*)*?Per(Minute|Day)"),
)
_ABBREVIATION_RE: Final = re.compile(r"\b(rpm|rpd|tpm|tpd)\b", re.IGNORECASE)
# Hints naming only the kind ("..._requests", "input_token_count") or only the window ("PerDay").
_KIND_HINT_RE: Final = re.compile(r"(?i:(request|token))s?(?![a-z])")
_WINDOW_HINT_RES: Final = (
    re.compile(r"(?i:per[\s_-]?(minute|min\b|day))"),
    re.compile(r"(?i:\b(daily)\b)"),
)


@dataclass(frozen=True, slots=True)
class _Mark:
    start: int
    end: int
    value: str  # an Axis for full phrases, "request"/"token" for kinds, "minute"/"day" for windows


def _norm_window(word: str) -> str:
    return "day" if word.lower() in ("day", "daily") else "minute"


def _axis_marks(text: str) -> list[_Mark]:
    marks: list[_Mark] = []
    for regex in _AXIS_PHRASE_RES:
        for m in regex.finditer(text):
            axis = _KIND_AXES[(m.group(1).lower(), _norm_window(m.group(2)))]
            marks.append(_Mark(m.start(), m.end(), axis))
    for m in _ABBREVIATION_RE.finditer(text):
        marks.append(_Mark(m.start(), m.end(), _ABBREVIATIONS[m.group(1).lower()]))
    return marks


def _kind_marks(text: str) -> list[_Mark]:
    return [_Mark(m.start(), m.end(), m.group(1).lower()) for m in _KIND_HINT_RE.finditer(text)]


def _window_marks(text: str) -> list[_Mark]:
    return [
        _Mark(m.start(), m.end(), _norm_window(m.group(1)))
        for regex in _WINDOW_HINT_RES
        for m in regex.finditer(text)
    ]


def _distance(mark: _Mark, start: int, end: int) -> int:
    """Characters between a mark and the span ``[start, end)`` (0 when they touch or overlap)."""
    if mark.end <= start:
        return start - mark.end
    if mark.start >= end:
        return mark.start - end
    return 0


def _nearest(marks: list[_Mark], start: int, end: int, lo: int = 0, hi: int | None = None) -> _Mark | None:
    """The mark nearest the span among those inside ``[lo, hi)``; on a tie the one after the span."""
    best: _Mark | None = None
    best_key: tuple[int, int] | None = None
    for mark in marks:
        if mark.start < lo or (hi is not None and mark.end > hi):
            continue
        key = (_distance(mark, start, end), 0 if mark.start >= end else 1)
        if best_key is None or key < best_key:
            best, best_key = mark, key
    return best


def _axis_for(
    text: str,
    span: tuple[int, int],
    number_end: int,
    line: tuple[int, int],
    marks: tuple[list[_Mark], list[_Mark], list[_Mark]],
) -> Axis | None:
    """The axis a limit at ``span`` talks about: its own line first, then the whole message."""
    axes, kinds, windows = marks
    start, end = span
    lo, hi = line
    # "limit: 2 requests per minute": a phrase right after the number is the limit's own unit.
    for mark in axes:
        if mark.start >= number_end and not text[number_end : mark.start].strip():
            return _as_axis(mark.value)
    found = _nearest(axes, start, end, lo, hi)
    if found is not None:
        return _as_axis(found.value)
    kind_mark = _nearest(kinds, start, end, lo, hi)
    if kind_mark is not None:
        kind = kind_mark.value
        same_kind = [m for m in axes if _AXIS_KIND[m.value] == kind]
        found = _nearest(same_kind, start, end)
        if found is not None:
            return _as_axis(found.value)
        window_mark = _nearest(windows, start, end, lo, hi) or _nearest(windows, start, end)
        if window_mark is None:
            return None
        return _KIND_AXES[(kind, window_mark.value)]
    found = _nearest(axes, start, end)
    if found is not None:
        return _as_axis(found.value)
    kind_mark = _nearest(kinds, start, end)
    window_mark = _nearest(windows, start, end, lo, hi) or _nearest(windows, start, end)
    if kind_mark is None or window_mark is None:
        return None
    return _KIND_AXES[(kind_mark.value, window_mark.value)]


def _as_axis(value: str) -> Axis | None:
    return _ABBREVIATIONS.get(value)


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    lo = text.rfind("\n", 0, pos) + 1
    hi = text.find("\n", pos)
    return lo, (len(text) if hi < 0 else hi)


def parse_limit_text(message: str) -> list[tuple[Axis, int]]:
    """Limits stated in a 429 error message; [] when nothing is readable. Never raises.

    A limit is ``limit[:=] N``, ``Limit N`` or ``limit of N`` (``N`` may use thousands commas). Its
    axis comes from the nearest phrase naming one — ``requests per minute``/``RPM``, ``requests per
    day``/``RPD``, ``tokens per minute``/``TPM``, ``tokens per day``/``TPD``, snake_case metric names,
    Gemini quotaIds (``GenerateRequestsPerMinutePerProjectPerModel``) — on the limit's own line, else
    from a kind (``..._requests``, ``..._token_count``) plus a window (``PerMinute``, ``PerDay``,
    ``per day``, ``daily``) found in the message. A limit with no axis, or ``N <= 0`` / ``N > 10**12``,
    is skipped. Duplicates are reported once, in message order.
    """
    if not isinstance(message, str) or not message:
        return []
    limits = list(_LIMIT_RE.finditer(message))
    if not limits:
        return []
    marks = (_axis_marks(message), _kind_marks(message), _window_marks(message))
    out: list[tuple[Axis, int]] = []
    for match in limits:
        digits = match.group(1).replace(",", "")
        if len(digits) > 13:
            continue
        value = int(digits)
        if value <= 0 or value > _MAX_TEXT_LIMIT:
            continue
        axis = _axis_for(
            message, (match.start(), match.end()), match.end(1), _line_bounds(message, match.start()), marks
        )
        if axis is not None and (axis, value) not in out:
            out.append((axis, value))
    return out
