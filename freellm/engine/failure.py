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

import enum
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from freellm.engine.error_bodies import (
    MAX_RETRY_AFTER_S,
    body_codes,
    cap_hint,
    parse_retry_after,
    retry_hint_from_body,
    retry_hint_from_text,
)
from freellm.engine.failure_signals import (
    CAUSE_MAX_DEPTH,
    CONTEXT_TOO_LARGE_PATTERNS,
    CONTEXT_TOO_LARGE_PHRASES,
    CREDIT_PHRASES,
    DAILY_MARKER,
    DAILY_QUOTA_MARKER,
    DEAD_TURN_MARKERS,
    DEGRADED_WORD,
    EMPTY_COMPLETION_MARKER,
    END_OF_LIFE_PHRASES,
    FORBIDDEN_WORD,
    FORMAT_IGNORED_MARKERS,
    INVALID_TOOL_ARGS_MARKER,
    KEY_AUTH_GENERIC,
    KEY_AUTH_SPECIFIC,
    MODEL_ACCESS_PHRASES,
    MODEL_GONE_WORD,
    MODEL_ID_DOES_NOT_EXIST,
    MODEL_NOT_FOUND_PHRASES,
    NO_LONGER_AVAILABLE,
    PROVIDER_400,
    PROVIDER_422,
    RATE_LIMIT_PHRASES,
    RETRYABLE_STATUSES,
    SERVER_ERROR_MIN,
    SERVER_PHRASES,
    STATED_STATUS,
    STATUS_DIGITS_5XX,
    STATUS_DIGITS_401,
    STATUS_DIGITS_402,
    STATUS_DIGITS_403,
    STATUS_DIGITS_404_410,
    STATUS_DIGITS_413,
    STATUS_DIGITS_429,
    TIMEOUT_PHRASES,
    TRANSPORT_CODES,
    TRANSPORT_ERRNOS,
    TRANSPORT_EXCEPTION_NAMES,
    TRANSPORT_PHRASES,
    UPGRADE_UPSELL,
)
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
    retirement: str | None = None
    """``gone`` (a 410, an end-of-life answer: retire the model now) or ``maybe`` (a "no longer
    available" 404: retire on the second within an hour), else None."""


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


# ── The classifier ────────────────────────────────────────────────────────────────────────────────


def classify(err: UpstreamError, *, secrets: Iterable[str] = ()) -> Failure:
    """Decide what one failed upstream attempt means. ``secrets`` are redacted from the message."""
    raw = err.message or ""
    msg = raw.lower()
    status = err.status
    codes = body_codes(err.body) if err.body is not None else frozenset()

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
    retry_after = cap_hint(err.retry_after_s)
    if retry_after is None and err.body is not None:
        retry_after = retry_hint_from_body(err.body)
    if retry_after is None:
        retry_after = retry_hint_from_text(raw)

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

    retirement = None
    if not_found or status == 410:
        if status == 410 or _has_any(msg, END_OF_LIFE_PHRASES):
            retirement = "gone"
        elif NO_LONGER_AVAILABLE in msg:
            retirement = "maybe"
    elif _has_any(msg, END_OF_LIFE_PHRASES) and status in (400, 404):
        retirement = "gone"

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
        retirement=retirement,
    )
