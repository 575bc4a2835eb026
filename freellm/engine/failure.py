"""The one failure classifier: what a failed upstream attempt means for the fallback loop.

Providers turn their wire errors into :class:`~freellm.errors.UpstreamError` (status, message, retry
hint, transport/timeout flags, synthetic dead-turn markers). :func:`classify` reads those facts once
and returns a :class:`Failure` — key-auth, retryable or fatal, the trail class, which skip sets the
failure feeds, and what kind of cooldown it calls for. The loop decides from the ``Failure`` alone.

Everything the gateway knows about provider error wording lives in the tables below, each row with a
comment naming who sends that signal. Rules read the structured status first; message phrases are
the fallback for errors that carry none (in-band stream errors, transport failures, synthetic dead
turns) or that put the real reason in the text. Bare status digits in a message ("404", "503") only
count when there is no status: with a status, a number in the text is just a number (a token count,
a duration), never a second status.

Order of the decision (spec §3): client abort → hedge abort (both handled by the loop, never seen
here) → key-auth → retryable → fatal.

Pure: no I/O, no clock, no state.
"""

from __future__ import annotations

import email.utils
import enum
import errno
import math
import re
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Final

import orjson

from freellm.engine.redact import redact
from freellm.errors import UpstreamError

__all__ = [
    "ERROR_CLASSES",
    "MAX_RETRY_AFTER_S",
    "CooldownKind",
    "Failure",
    "FailureKind",
    "classify",
    "http_error_message",
    "parse_retry_after",
]

MAX_RETRY_AFTER_S: Final = 86400.0
"""A retry hint is never trusted beyond a day."""

MESSAGE_LIMIT: Final = 240


class FailureKind(enum.Enum):
    KEY_AUTH = "key_auth"
    """The key is bad (401 / invalid key): skip it, cool it down 5 min, revalidate; no penalty."""
    RETRYABLE = "retryable"
    """Another route may serve the request: skip, cool down, try the next candidate."""
    FATAL = "fatal"
    """Retrying cannot help: the loop answers 502 ``provider_error`` at once."""


class CooldownKind(enum.Enum):
    """What kind of cooldown the failure calls for (the duration is :mod:`freellm.routing.cooldowns`)."""

    NONE = "none"
    """No cooldown: fatal, or a fact about the request rather than the route (context too large)."""
    AUTH = "auth"
    CREDIT = "credit"
    TIER = "tier"
    DAILY = "daily"
    TRANSIENT = "transient"


ERROR_CLASSES: Final[tuple[str, ...]] = (
    "auth",
    "out_of_credits",
    "daily_quota_exhausted",
    "model_not_found",
    "forbidden",
    "context_too_large",
    "provider_bad_request",
    "empty_completion",
    "format_ignored",
    "invalid_tool_arguments",
    "timeout",
    "rate_limited",
    "upstream_error",
    "error",
)
"""Trail classes in precedence order (spec §3 "Trail")."""


@dataclass(frozen=True, slots=True)
class Failure:
    kind: FailureKind
    error_class: str
    """One of :data:`ERROR_CLASSES`."""
    skip_model: bool
    """Rule the whole model out for this request (404/410, 403/access denied, too large, dead turn)."""
    skip_provider: bool
    """Rule the whole provider out for this request (5xx, degraded, status-less timeout/transport)."""
    skip_bench: bool
    """No cooldown, no penalty, no breaker count (the key is still skipped for this request)."""
    cooldown: CooldownKind
    retry_after_s: float | None
    """The upstream's retry hint in seconds (≤ 24 h), from the error, its body or its prose."""
    rate_limit_signal: bool
    """A real quota signal (a 429, or rate-limit wording without a status): feeds the null-limit ladder."""
    degraded: bool
    """The provider called its deployment degraded: exhaustion renders 503 ``provider_degraded``."""
    provider_bad_request: bool
    """The provider rejected the request shape (its 400/422): exhaustion may render 400."""
    message: str
    """The upstream message, redacted, at most 240 chars."""


# ── Status tables ─────────────────────────────────────────────────────────────────────────────────

# Statuses that are retryable on their own, whatever the body says.
RETRYABLE_STATUSES: Final = frozenset(
    {
        408,  # Request Timeout — proxies and load balancers in front of slow hosts
        409,  # Conflict — OpenAI-compatible hosts reloading a model ("model is loading")
        410,  # Gone — Ollama Cloud / hosted catalogs when a model is pulled
        422,  # Unprocessable Entity — Mistral's strict request validation; another host may accept it
        429,  # Too Many Requests — every provider's rate limit
    }
)
SERVER_ERROR_MIN: Final = 500  # ≥ 500: the provider failed (502/503/504 gateways, Anthropic's 529)

# ── Key-auth ──────────────────────────────────────────────────────────────────────────────────────

# Phrases that name a bad *key*. Count with status 400 (Google's way of rejecting a key) or no status.
KEY_AUTH_SPECIFIC: Final = (
    "api key not valid",  # Gemini 400 INVALID_ARGUMENT "API key not valid. Please pass a valid API key."
    "api key expired",  # Gemini 400 "API key expired. Please renew the API key."
    "api_key_invalid",  # Gemini error reason API_KEY_INVALID in error.details
)
# Generic auth wording. Counts only without a status (an in-band error, a wrapped SDK error): with a
# status, a 400/403 body that says "unauthorized" is about the request or the model, not the key.
KEY_AUTH_GENERIC: Final = (
    "unauthorized",  # HTTP reason phrase echoed by proxies; Cloudflare "Unauthorized"
    "invalid api key",  # Groq "Invalid API Key"; Anthropic "invalid x-api-key" is a 401 anyway
    "invalid_api_key",  # OpenAI error code invalid_api_key
    "incorrect api key",  # OpenAI "Incorrect API key provided: sk-…"
    "authentication failed",  # NVIDIA NIM / generic gateways
    "authentication_error",  # Anthropic error type, also seen as an in-band stream error event
)

# ── Out of credits (402) ──────────────────────────────────────────────────────────────────────────

CREDIT_PHRASES: Final = (
    "payment required",  # Hugging Face router "API error 402: Payment required"
    "insufficient_quota",  # OpenAI 429 code insufficient_quota ("You exceeded your current quota")
    "insufficient credit",  # OpenRouter 402 "Insufficient credits"
    "insufficient balance",  # DeepSeek 402 "Insufficient Balance"; SiliconFlow
    "credit balance is too low",  # Anthropic 400 "Your credit balance is too low to access the API"
    "credits are depleted",  # Google AI Studio prepaid credits
)

# ── Daily quota ───────────────────────────────────────────────────────────────────────────────────

# Cloudflare "you have used up your daily free allocation of 10,000 neurons"; OpenRouter
# "free-models-per-day"; Groq RPD "Rate limit reached … on requests per day (RPD)"; Gemini
# "GenerateRequestsPerDayPerProjectPerModel-FreeTier". Needs a day marker *and* a quota marker.
DAILY_MARKER: Final = re.compile(r"daily|per[ _-]?day|\btoday\b")
DAILY_QUOTA_MARKER: Final = re.compile(r"allocation|quota|limit|exhaust|used up")
# Groq ends every limit error with "Need more tokens? Upgrade to Dev Tier today at …": sales copy.
UPGRADE_UPSELL: Final = re.compile(r"\bupgrade to [^.?!]*?\btoday\b")

# ── Model not found / gone (404, 410) ─────────────────────────────────────────────────────────────

MODEL_NOT_FOUND_PHRASES: Final = (
    "not found",  # OpenAI "The model `x` does not exist or you do not have access"; NIM "Not found for account"
    "no endpoints found",  # OpenRouter 404 "No endpoints found for <model>"
    "no model found",  # Routeway 400 "No model found: llama-3.3-70b-instruct:free"
    "unknown model",  # Mistral "Invalid model: unknown model"
    "model does not exist",  # various OpenAI-compatible hosts
    "no such model",  # Ollama / llama.cpp servers
    "not supported for chat completions",  # NavyAI, OpenAI: a real id this endpoint cannot serve
    "model_not_found",  # OpenAI / Groq error code
)
MODEL_GONE_WORD: Final = re.compile(r"\bgone\b")  # Ollama Cloud "API error 410: Gone"
# NavyAI 400 "The model 'o3-mini' does not exist or is not supported for chat completions."
MODEL_ID_DOES_NOT_EXIST: Final = re.compile(
    r"\bmodel\b\s+['\"`]?[^\s'\"`]{1,200}['\"`]?\s+(?:does\s+not|doesn't)\s+exist\b"
)

# ── Forbidden / model access (403) ────────────────────────────────────────────────────────────────

FORBIDDEN_WORD: Final = "forbidden"  # HTTP reason phrase; GitHub Models free tier, Cloudflare
# "This key may not use this model" in words, for providers that don't send a 403 (status 400/401 or
# none): KAT-Coder 400 "user is not allowed to access model …", plan gates worded as limits.
MODEL_ACCESS_PHRASES: Final = (
    "not allowed to access",
    "not allowed to use",
    "not authorized to access",
    "not authorized to use",
    "unauthorized to access",
    "not permitted to access",
    "not permitted to use",
    "do not have access to",
    "does not have access to",
    "no access to model",
    "no access to this model",
    "model access denied",
    "access to this model is restricted",
    "action plan limited",
)

# ── Context / payload too large (413) ─────────────────────────────────────────────────────────────

CONTEXT_TOO_LARGE_PHRASES: Final = (
    "context_length_exceeded",  # OpenAI-compatible 400 code
    "maximum context length",  # OpenAI "This model's maximum context length is 8192 tokens"
    "context length exceeded",
    "prompt is too long",  # Anthropic "prompt is too long: 210000 tokens > 200000 maximum"
    "input is too long",  # Bedrock "Input is too long for requested model."
    "exceeds the maximum number of tokens",  # Gemini "The input token count (…) exceeds the maximum …"
    "request too large",  # Groq 413 "Request too large for model `x` … on tokens per minute (TPM)"
    "payload too large",  # reverse proxies 413
    "request entity too large",  # nginx 413
    "request body too large",
    "content too large",  # RFC 9110 reason phrase for 413
    "exceeds max length",  # Zhipu (bigmodel.cn) 400 code 1261 "Prompt exceeds max length"
    "api error 413",  # our OpenAI-compatible error format, for an in-band or wrapped 413
)
CONTEXT_TOO_LARGE_PATTERNS: Final = (
    re.compile(r"exceeds[^.]*context (?:length|window|size)"),  # "… exceeds the model's context window"
    re.compile(r"input token count[^.]*exceeds"),  # Gemini
)

# ── Provider rejected the request shape (400, 422) ────────────────────────────────────────────────

# Our OpenAI-compatible providers word an HTTP error "API error <status>: <upstream message>" (see
# :func:`http_error_message`). A 400 is a *provider* rejection (retryable: another host may accept the
# same payload) only when it carries that wording; a bare 400 is fatal.
PROVIDER_400: Final = "api error 400"
PROVIDER_422: Final = ("api error 422", "unprocessable entity")  # Mistral 422

# ── Degraded deployment ───────────────────────────────────────────────────────────────────────────

# NVIDIA NIM 400 {"detail":"Function id '…': DEGRADED function cannot be invoked"}: provider health
# wearing a 400. Never a provider bad request; exhaustion renders 503.
DEGRADED_WORD: Final = "degraded"

# ── Rate limit / quota ────────────────────────────────────────────────────────────────────────────

RATE_LIMIT_PHRASES: Final = (
    "rate limit",  # OpenAI/Groq "Rate limit reached for model …", Mistral, Together
    "rate_limit",  # OpenAI/Anthropic error types rate_limit_exceeded / rate_limit_error (in-band)
    "too many requests",  # the 429 reason phrase, echoed by proxies and SDKs
    "quota",  # Gemini "You exceeded your current quota"; Cloudflare neuron allocation
    "resource_exhausted",  # Gemini / Vertex gRPC status RESOURCE_EXHAUSTED
)

# ── Server side (5xx) ─────────────────────────────────────────────────────────────────────────────

SERVER_PHRASES: Final = (
    "unavailable",  # 503 reason phrase; Gemini "The model is overloaded… UNAVAILABLE"
    "internal server error",  # 500 reason phrase
    "bad gateway",  # 502 from Cloudflare / nginx in front of a host
    "overloaded",  # Anthropic overloaded_error (529), also as an in-band stream error event
    DEGRADED_WORD,
)

# ── Timeouts ──────────────────────────────────────────────────────────────────────────────────────

TIMEOUT_PHRASES: Final = (
    "timeout",  # our own first-byte / total timeouts; 504 "Gateway Timeout"; aiohttp ServerTimeoutError
    "timed out",  # Python socket / asyncio wording
    "stalled",  # our pump's idle watchdog "stream stalled: no data for 90s"
    "etimedout",  # errno name echoed by Node-based relays
    "aborted",  # "The operation was aborted" from relays; a provider-side abort
    "no first byte",  # our first-byte grace budget ran out
)

# ── Transport ─────────────────────────────────────────────────────────────────────────────────────

# Connection-level failures in words: Python/aiohttp (our own client) and Node relays upstream of us.
TRANSPORT_PHRASES: Final = (
    "fetch failed",  # Node undici relays: DNS/TLS/proxy down
    "socket hang up",  # Node relays
    "premature close",
    "other side closed",
    "client network socket disconnected",  # TLS handshake cut (Node)
    "connection reset",  # Python ConnectionResetError "Connection reset by peer"
    "connection refused",  # Python ConnectionRefusedError
    "connection aborted",
    "broken pipe",  # Python BrokenPipeError
    "server disconnected",  # aiohttp ServerDisconnectedError
    "cannot connect to host",  # aiohttp ClientConnectorError
    "name or service not known",  # getaddrinfo failure
    "temporary failure in name resolution",
    "response payload is not completed",  # aiohttp ClientPayloadError on a cut body
)
TRANSPORT_CODES: Final = re.compile(
    r"\b(?:econnreset|econnrefused|econnaborted|epipe|etimedout|eai_again|enotfound|ehostunreach"
    r"|enetunreach|eaddrnotavail|und_err_[a-z_]+)\b"
)
TRANSPORT_ERRNOS: Final = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.EADDRNOTAVAIL,
    }
)
# aiohttp's client exceptions (matched by name so this module needs no aiohttp import).
TRANSPORT_EXCEPTION_NAMES: Final = frozenset(
    {
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "ServerConnectionError",
        "ClientConnectionResetError",
        "ContentLengthError",
        "TransferEncodingError",
        "IncompleteReadError",
    }
)
CAUSE_MAX_DEPTH: Final = 5

# ── Synthetic dead-turn markers (our pump, tool layer and providers) ──────────────────────────────

DEAD_TURN_MARKERS: Final = (
    "empty completion",  # pump: no text and no tool calls (skip_bench when finish was "length")
    "ignored response_format",  # structured output: the model answered in prose
    "truncated json",  # structured output: JSON cut at max_tokens (skip_model)
    "in-band provider error",  # pump: an {error} frame before commit
    "stream ended unexpectedly",  # SSE reader: EOF without [DONE] or a finish_reason
    "stream stalled",  # pump: idle watchdog
    "no first byte",  # provider: first-byte timeout
    "unparseable inline tool-call dialect",  # tool rescue: detected but unparseable
    "invalid tool arguments",  # tool validation (opt-in): arguments violate the declared schema
)
FORMAT_IGNORED_MARKERS: Final = ("ignored response_format", "truncated json")
INVALID_TOOL_ARGS_MARKER: Final = "invalid tool arguments"
EMPTY_COMPLETION_MARKER: Final = "empty completion"

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


def _standalone(number: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + number + r"(?![\w.])")


# Digits that stand alone as a status in a status-less message ("Error 503", "(http 429)").
STATUS_DIGITS_429: Final = _standalone("429")
STATUS_DIGITS_5XX: Final = _standalone("(?:500|502|503|504|529)")
STATUS_DIGITS_413: Final = _standalone("413")
STATUS_DIGITS_404_410: Final = _standalone("(?:404|410)")
STATUS_DIGITS_403: Final = _standalone("403")
STATUS_DIGITS_402: Final = _standalone("402")
STATUS_DIGITS_401: Final = _standalone("401")
# A status stated in the text ("API error 503", "(HTTP 402)"): an error that states another status is
# never a 402 by its digits.
STATED_STATUS: Final = re.compile(r"\bapi error (\d{3})\b|\(http (\d{3})\)")


def http_error_message(status: int, detail: str) -> str:
    """The wording providers use for an HTTP error: ``API error <status>: <detail>``.

    The classifier relies on it: a 400 is a retryable provider rejection only with this wording.
    """
    return f"API error {status}: {detail}" if detail else f"API error {status}"


# ── Predicates ────────────────────────────────────────────────────────────────────────────────────


def _has_any(msg: str, phrases: Iterable[str]) -> bool:
    return any(p in msg for p in phrases)


def _is_key_auth(status: int | None, msg: str) -> bool:
    if status == 401:
        return True
    specific = _has_any(msg, KEY_AUTH_SPECIFIC)
    if status == 400:
        return specific
    if status is not None:
        return False
    return specific or _has_any(msg, KEY_AUTH_GENERIC) or bool(STATUS_DIGITS_401.search(msg))


def _is_credit(status: int | None, msg: str) -> bool:
    if status == 402 or _has_any(msg, CREDIT_PHRASES):
        return True
    if status is not None:
        return False
    stated = STATED_STATUS.search(msg)
    if stated:
        return (stated.group(1) or stated.group(2)) == "402"
    return bool(STATUS_DIGITS_402.search(msg))


def _is_context_too_large(status: int | None, msg: str, codes: Iterable[str]) -> bool:
    if status == 413 or "context_length_exceeded" in codes:
        return True
    if _has_any(msg, CONTEXT_TOO_LARGE_PHRASES) or any(p.search(msg) for p in CONTEXT_TOO_LARGE_PATTERNS):
        return True
    return status is None and bool(STATUS_DIGITS_413.search(msg))


def _is_daily_quota(msg: str) -> bool:
    text = UPGRADE_UPSELL.sub("", msg)
    return bool(DAILY_MARKER.search(text)) and bool(DAILY_QUOTA_MARKER.search(text))


def _is_model_not_found(status: int | None, msg: str) -> bool:
    if status in (404, 410):
        return True
    if _has_any(msg, MODEL_NOT_FOUND_PHRASES) or MODEL_GONE_WORD.search(msg):
        return True
    if MODEL_ID_DOES_NOT_EXIST.search(msg):
        return True
    return status is None and bool(STATUS_DIGITS_404_410.search(msg))


def _is_forbidden(status: int | None, msg: str) -> bool:
    if status == 403 or FORBIDDEN_WORD in msg:
        return True
    if status is None and STATUS_DIGITS_403.search(msg):
        return True
    if status not in (None, 400, 401):
        return False
    return _has_any(msg, MODEL_ACCESS_PHRASES)


def _is_provider_bad_request(status: int | None, msg: str, degraded: bool) -> bool:
    if degraded:
        return False
    if status == 400:
        return PROVIDER_400 in msg
    if status == 422:
        return True
    if status is not None:
        return False
    return PROVIDER_400 in msg or _has_any(msg, PROVIDER_422)


def _cause_chain(err: BaseException) -> Iterator[BaseException]:
    """The exceptions ``err`` was raised from (``__cause__``, else ``__context__``), bounded, cycle-safe."""
    seen: set[int] = {id(err)}
    cur: BaseException | None = err.__cause__ or (None if err.__suppress_context__ else err.__context__)
    depth = 0
    while cur is not None and depth < CAUSE_MAX_DEPTH and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        depth += 1
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)


def _chain_signals(err: BaseException) -> tuple[bool, bool]:
    """(transport, timeout) evidence from the exceptions ``err`` wraps."""
    transport = timeout = False
    for link in _cause_chain(err):
        if isinstance(link, TimeoutError):
            timeout = True
        elif (
            isinstance(link, ConnectionError)  # ConnectionResetError, BrokenPipeError, …
            or type(link).__name__ in TRANSPORT_EXCEPTION_NAMES  # aiohttp client errors
            or isinstance(link, socket.gaierror)  # DNS failure
            or (isinstance(link, OSError) and link.errno in TRANSPORT_ERRNOS)
        ):
            transport = True
        text = str(link).lower()
        if text.strip() == "terminated" or _has_any(text, TRANSPORT_PHRASES) or TRANSPORT_CODES.search(text):
            transport = True
    return transport, timeout


def _walk_body(body: Any) -> Iterator[tuple[str, Any]]:
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


def _decode_body(body: Any) -> Any:
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


def _cap_hint(seconds: float | None) -> float | None:
    if seconds is None or math.isnan(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def _retry_hint_from_body(body: Any) -> float | None:
    decoded = _decode_body(body)
    for key, value in _walk_body(decoded):
        if key not in RETRY_BODY_KEYS:
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            return _cap_hint(float(value))
        if isinstance(value, str):
            hint = _cap_hint(_parse_duration(value))
            if hint is not None:
                return hint
    if decoded is None and isinstance(body, str):
        m = RETRY_BODY_TEXT.search(body)
        if m:
            return _cap_hint(_parse_duration(m.group(1)))
    return None


def _retry_hint_from_text(message: str) -> float | None:
    m = RETRY_PROSE.search(message)
    if m:
        return _cap_hint(_parse_duration(m.group(1)))
    m = RETRY_BODY_TEXT.search(message)  # a JSON body quoted into the message
    if m:
        return _cap_hint(_parse_duration(m.group(1)))
    return None


def _body_codes(body: Any) -> frozenset[str]:
    decoded = _decode_body(body)
    return frozenset(
        v.lower()
        for k, v in _walk_body(decoded)
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


# ── The classifier ────────────────────────────────────────────────────────────────────────────────


def classify(err: UpstreamError, *, secrets: Iterable[str] = ()) -> Failure:
    """Decide what one failed upstream attempt means. ``secrets`` are redacted from the message."""
    raw = err.message or ""
    msg = raw.lower()
    status = err.status
    codes = _body_codes(err.body) if err.body is not None else frozenset()

    chain_transport, chain_timeout = _chain_signals(err)
    degraded = DEGRADED_WORD in msg
    credit = _is_credit(status, msg) or "insufficient_quota" in codes
    too_large = _is_context_too_large(status, msg, codes)
    daily = not too_large and _is_daily_quota(msg)
    not_found = _is_model_not_found(status, msg) or "model_not_found" in codes
    forbidden = _is_forbidden(status, msg)
    bad_request = _is_provider_bad_request(status, msg, degraded)
    timeout = err.timeout or chain_timeout or _has_any(msg, TIMEOUT_PHRASES)
    transport = (
        err.transport
        or chain_transport
        or msg.strip() == "terminated"  # Node undici: a body whose socket died mid-read (whole message only)
        or _has_any(msg, TRANSPORT_PHRASES)
        or bool(TRANSPORT_CODES.search(msg))
    )
    rate_limit_text = _has_any(msg, RATE_LIMIT_PHRASES) or (
        status is None and bool(STATUS_DIGITS_429.search(msg))
    )
    rate_limit_signal = status == 429 if status is not None else rate_limit_text
    server = (
        (status is not None and status >= SERVER_ERROR_MIN)
        or _has_any(msg, SERVER_PHRASES)
        or (status is None and bool(STATUS_DIGITS_5XX.search(msg)))
    )
    empty = EMPTY_COMPLETION_MARKER in msg
    format_ignored = _has_any(msg, FORMAT_IGNORED_MARKERS)
    invalid_tool_args = INVALID_TOOL_ARGS_MARKER in msg
    dead_turn = _has_any(msg, DEAD_TURN_MARKERS)

    # Trail class, in the spec's precedence order.
    if _is_key_auth(status, msg):
        error_class = "auth"
    elif credit:
        error_class = "out_of_credits"
    elif daily:
        error_class = "daily_quota_exhausted"
    elif not_found:
        error_class = "model_not_found"
    elif forbidden:
        error_class = "forbidden"
    elif too_large:
        error_class = "context_too_large"
    elif degraded:
        error_class = "upstream_error"  # provider health, not the request's shape
    elif bad_request:
        error_class = "provider_bad_request"
    elif empty:
        error_class = "empty_completion"
    elif format_ignored:
        error_class = "format_ignored"
    elif invalid_tool_args:
        error_class = "invalid_tool_arguments"
    elif timeout:
        error_class = "timeout"
    elif rate_limit_text or status == 429:
        error_class = "rate_limited"
    elif server or transport:
        error_class = "upstream_error"
    else:
        error_class = "error"

    message = redact(raw, secrets, limit=MESSAGE_LIMIT)
    retry_after = _cap_hint(err.retry_after_s)
    if retry_after is None and err.body is not None:
        retry_after = _retry_hint_from_body(err.body)
    if retry_after is None:
        retry_after = _retry_hint_from_text(raw)

    if error_class == "auth":
        return Failure(
            kind=FailureKind.KEY_AUTH,
            error_class="auth",
            skip_model=False,
            skip_provider=False,
            skip_bench=False,
            cooldown=CooldownKind.AUTH,
            retry_after_s=retry_after,
            rate_limit_signal=False,
            degraded=False,
            provider_bad_request=False,
            message=message,
        )

    retryable = (
        (status is not None and (status in RETRYABLE_STATUSES or status >= SERVER_ERROR_MIN))
        or transport
        or timeout
        or rate_limit_text
        or server
        or too_large
        or not_found
        or forbidden
        or bad_request
        or credit
        or daily
        or dead_turn
        or err.skip_model
        or err.skip_bench
    )
    if not retryable:
        # A bare 400 without "api error 400", a 401-less auth-ish wording with a status, anything
        # unrecognised: retrying cannot help.
        return Failure(
            kind=FailureKind.FATAL,
            error_class=error_class,
            skip_model=False,
            skip_provider=False,
            skip_bench=False,
            cooldown=CooldownKind.NONE,
            retry_after_s=retry_after,
            rate_limit_signal=False,
            degraded=degraded,
            provider_bad_request=False,
            message=message,
        )

    model_scoped_turn = format_ignored or invalid_tool_args  # the model's behaviour, not the key's
    skip_model = not_found or forbidden or too_large or err.skip_model or model_scoped_turn
    # Provider health: a failure the thrower scoped to the model is never provider health (its text
    # quotes caller- and model-supplied words: a tool named "set_timeout").
    skip_provider = not (err.skip_model or model_scoped_turn) and (
        (status is not None and status >= SERVER_ERROR_MIN)
        or degraded
        or (status is None and (timeout or transport))
    )
    skip_bench = err.skip_bench or model_scoped_turn

    if too_large:
        cooldown = CooldownKind.NONE  # a fact about this request; the model still serves smaller ones
    elif credit:
        cooldown = CooldownKind.CREDIT
    elif forbidden:
        cooldown = CooldownKind.TIER
    elif daily:
        cooldown = CooldownKind.DAILY
    else:
        cooldown = CooldownKind.TRANSIENT

    return Failure(
        kind=FailureKind.RETRYABLE,
        error_class=error_class,
        skip_model=skip_model,
        skip_provider=skip_provider,
        skip_bench=skip_bench,
        cooldown=cooldown,
        retry_after_s=retry_after,
        rate_limit_signal=rate_limit_signal,
        degraded=degraded,
        # Only a failure whose class *is* the shape rejection: a 400 that is really "no model found" or
        # "context too large" must not make the exhaustion blame the caller's request.
        provider_bad_request=error_class == "provider_bad_request",
        message=message,
    )
