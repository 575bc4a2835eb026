"""What upstream errors say, as commented tables: the signals the failure classifier reads.

Every row names who sends that signal. Rules in :mod:`freellm.engine.failure` read the structured
status first; these phrases are the fallback for errors that carry none or hide the reason in text.
Pure data (and two tiny pattern builders): no I/O, no state.
"""

from __future__ import annotations

import errno
import re
from typing import Final

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
# Retirement (spec §10): the provider says the model is gone for good. OpenAI "The model `x` has been
# deprecated"; Groq "The model `x` has been decommissioned and is no longer supported"; Anthropic
# "model has reached its end of life"; Mistral/Together "model ... is retired".
END_OF_LIFE_PHRASES: Final = (
    "decommissioned",
    "end of life",
    "end-of-life",
    "has been deprecated",
    "has been retired",
    "is retired",
    "no longer supported",
)
# A 404 worded like this may be a transient catalog glitch: two within an hour retire the model.
NO_LONGER_AVAILABLE: Final = "no longer available"
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
