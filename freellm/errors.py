"""One error hierarchy for the whole gateway.

* :class:`ClientError` — the client's request is wrong (or not allowed); rendered by the surface with
  its own status code, never retried.
* :class:`UpstreamError` — one upstream attempt failed. Providers raise it with whatever facts the wire
  gave (status, retry hint, transport failure, synthetic dead-turn marker); the failure classifier turns
  those facts into a decision. The message is always redacted before it is stored.
* :class:`Exhausted` — the fallback loop ran out of routes; carries the final status, the trail and the
  soonest retry time so every surface can render it in its own envelope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ClientError",
    "Exhausted",
    "FreeLLMError",
    "RecordsStoreError",
    "RecordsUnavailable",
    "TrailEntry",
    "UpstreamError",
]


class FreeLLMError(Exception):
    """Base of every error the gateway raises on purpose."""


class ClientError(FreeLLMError):
    """A request the gateway refuses: bad input, bad key, unknown model, over a limit."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})

    def envelope(self) -> dict[str, Any]:
        """The OpenAI-style error body ``{"error": {...}}``."""
        err: dict[str, Any] = {"message": self.message, "type": self.type}
        if self.code is not None:
            err["code"] = self.code
        if self.param is not None:
            err["param"] = self.param
        return {"error": err}


class RecordsUnavailable(ClientError):
    """The durable records store (PostgreSQL) cannot be reached and only it holds what was asked for —
    e.g. a ``previous_response_id`` stored by another replica. A :class:`ClientError` subclass only so
    every surface renders it in its own envelope: a 503 ``records_unavailable``, never a 500 or a 404
    (the response may well exist; the client can retry once the store is back)."""

    def __init__(self, message: str = "The records store is unavailable; retry shortly.") -> None:
        super().__init__(503, message, type="server_error", code="records_unavailable")


class RecordsStoreError(FreeLLMError):
    """The records store refused to start: a refused login, an unknown database, a schema newer than
    this freellm. A configuration problem, not an outage — the message names the cause (never the
    password) and ``freellm serve`` exits with it instead of a traceback."""


class UpstreamError(FreeLLMError):
    """One failed upstream attempt, described by the facts the wire gave.

    ``status`` is the upstream HTTP status (None for transport failures, in-band errors and synthetic
    dead turns). ``transport`` marks connection-level failures (refused, reset, DNS, cut stream).
    ``retry_after_s`` is a retry hint already parsed from a header or body. ``skip_model`` asks the loop
    not to try this model again for this request; ``skip_bench`` exempts the failure from cooldowns and
    penalties (a dead turn that is the model's fault, not the key's).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        transport: bool = False,
        retry_after_s: float | None = None,
        skip_model: bool = False,
        skip_bench: bool = False,
        timeout: bool = False,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.transport = transport
        self.retry_after_s = retry_after_s
        self.skip_model = skip_model
        self.skip_bench = skip_bench
        self.timeout = timeout
        self.body = body
        self.headers = headers
        """The error answer's response headers (rate-limit windows), when there was an answer."""

    def __repr__(self) -> str:
        return f"UpstreamError(status={self.status!r}, message={self.message[:120]!r})"


@dataclass(frozen=True, slots=True)
class TrailEntry:
    """One failed hop: which route, which key (per-request ordinal, never the key), and why."""

    provider: str
    model: str
    key_n: int
    error_class: str
    message: str = ""
    started_ms: int = 0
    duration_ms: int = 0

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model} key{self.key_n}={self.error_class}"


@dataclass(slots=True)
class Exhausted(FreeLLMError):
    """The fallback loop gave up. Surfaces render this in their own error envelope."""

    status: int
    type: str
    code: str
    message: str
    trail: list[TrailEntry] = field(default_factory=list)
    retry_at_ms: int | None = None

    def __post_init__(self) -> None:
        Exception.__init__(self, self.message)

    def envelope(self) -> dict[str, Any]:
        err: dict[str, Any] = {"message": self.message, "type": self.type, "code": self.code}
        if self.retry_at_ms is not None:
            err["retryAtMs"] = self.retry_at_ms
        return {"error": err}
