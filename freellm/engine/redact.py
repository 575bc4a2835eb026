"""Remove credentials from upstream text before it reaches a log line, a header or a client.

Upstream error bodies are not trusted to be clean: proxies echo the ``Authorization`` header back,
SDK wrappers print the request URL with ``?key=…`` in it, and some providers quote the offending key
("Incorrect API key provided: sk-…"). :func:`redact` runs over every such message once, at the edge
where it enters the gateway, and again wherever text leaves it.

Pure: a few compiled regexes and ``str.replace``; no I/O, no state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["DEFAULT_LIMIT", "redact"]

DEFAULT_LIMIT: Final = 240
"""Default cap on a redacted message (the reference's provider-error limit)."""

_ELLIPSIS: Final = "..."
_MIN_SECRET_LEN: Final = 4
"""Literal secrets shorter than this are not replaced: replacing "ab" everywhere would shred the text."""

# (pattern, replacement) applied in order. Each row names who puts such a credential in a message.
_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # An echoed Authorization header: proxies and SDK debug strings ("Bearer sk-…", "Basic dXNlcjpw…").
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE), r"\1 [redacted]"),
    # Query-string credentials in an echoed URL: Gemini's ``?key=AIza…``, ``api_key=`` / ``token=`` on
    # OpenAI-compatible hosts that accept the key in the URL.
    (
        re.compile(
            r"(?<![\w-])(key|api[_-]?key|apikey|access[_-]?token|token|secret|password|x-api-key"
            r"|x-goog-api-key)=([^&\s\"'<>#]+)",
            re.IGNORECASE,
        ),
        r"\1=[redacted]",
    ),
    # JSON or prose key/value pairs: ``{"api_key": "…"}``, ``x-api-key: …``, ``Authorization: …``
    # (quote-tolerant, so JSON bodies echoed into a message are caught too).
    (
        re.compile(
            r"""(["']?)\b(api[_-]?key|apikey|x-api-key|x-goog-api-key|access[_-]?token|secret"""
            r"""|authorization|password)\1(\s*:\s*)(["']?)(?!\[redacted|Bearer\b|Basic\b)[^"',\s}\]]+""",
            re.IGNORECASE,
        ),
        r"\1\2\1\3\4[redacted]",
    ),
    # Provider key shapes: OpenAI/Anthropic/OpenRouter/DeepSeek ``sk-…``, Groq ``gsk_…``, xAI ``xai-…``,
    # NVIDIA ``nvapi-…``, Hugging Face ``hf_…``, GitHub Models ``ghp_…``/``github_pat_…``, Cerebras
    # ``csk-…``, Perplexity ``pplx-…``, Fireworks ``fw_…``, and this gateway's own client keys.
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?:sk-|sk_|gsk_|xai-|nvapi-|hf_|ghp_|gho_|ghu_|ghs_|github_pat_|csk-|pplx-"
            r"|fw_|freellm-|freellm_)[A-Za-z0-9_-]{8,}"
        ),
        "[redacted-key]",
    ),
    # Google API keys (Gemini / AI Studio): ``AIza`` + 35 characters.
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{20,}"), "[redacted-key]"),
    # JWT-shaped bearer tokens (Vertex/Azure AD access tokens, session tokens).
    (
        re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
        "[redacted-token]",
    ),
    # Bare high-entropy runs with no known prefix (Cloudflare, Mistral, Cohere keys are 32+ plain
    # alphanumerics). Needs a digit and a letter so ordinary long words survive.
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{32,}(?![A-Za-z0-9])"
        ),
        "[redacted-token]",
    ),
)

_WHITESPACE: Final = re.compile(r"\s+")


def redact(text: str, secrets: Iterable[str] = (), *, limit: int | None = DEFAULT_LIMIT) -> str:
    """Return ``text`` with credentials removed, whitespace collapsed and length capped.

    ``secrets`` are literal strings (the provider keys used for the request) replaced wherever they
    appear, before the shape-based patterns run. ``limit`` caps the result (``None`` = no cap); a
    truncated result ends in ``...`` and is never longer than ``limit``.
    """
    out = text
    # Longest first, so a key that contains another configured key is removed whole.
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        if secret in out:
            out = out.replace(secret, "[redacted]")
    for pattern, replacement in _PATTERNS:
        out = pattern.sub(replacement, out)
    out = _WHITESPACE.sub(" ", out).strip()
    if limit is not None and len(out) > limit:
        if limit <= len(_ELLIPSIS):
            return out[:limit]
        out = out[: limit - len(_ELLIPSIS)].rstrip() + _ELLIPSIS
    return out
