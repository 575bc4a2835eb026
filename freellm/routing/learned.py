"""Rate limits learned from what providers say, so a key is skipped before it gets a 429.

Two sources: the windows in a response's headers (:mod:`freellm.routing.ratelimit_headers` — OpenAI,
Groq, Cerebras, OpenRouter and Anthropic spellings) and the limit a 429's text states (``limit: 2
requests per minute``). What is learned:

* a window with nothing left (``remaining: 0`` and a reset) → that key/model gets a ``learned``
  cooldown until the reset, without a failed request;
* a 429 stating its limit → the key is kept out for the rest of that window (a minute, or until the
  next UTC midnight for a daily one), although the heuristic cooldown is shorter;
* a stated limit → the model's limit on that axis: it fills a missing one or lowers one, never raises
  a configured one (:meth:`LearnedLimits.effective`).

Learned limits are kept per process and persisted through the store's settings, so a restart keeps
them; every change is a small JSON write, and changes are rare.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from freellm.config import ModelLimits
from freellm.routing.catalog import ModelRoute
from freellm.routing.ratelimit_headers import Axis, WindowReading, parse_limit_text, parse_rate_limit_headers
from freellm.store.base import setting_object

__all__ = [
    "LEARNED_SETTING",
    "LearnedLimits",
    "WindowBlock",
    "blocks_from_headers",
    "blocks_from_text",
    "has_rate_limit_headers",
    "readings",
    "text_limits",
]

LEARNED_SETTING = "learned_limits"
"""The store setting that holds the learned limits (JSON: label → {axis: value})."""

_DAY = 86_400.0
_MAX_BLOCK_S = _DAY
"""A reset further away than a day is not believed."""

_MARKERS = (
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-remaining",
    "x-ratelimit-remaining-requests-day",
    "x-ratelimit-remaining-tokens-minute",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-remaining",
    "x-ratelimit-limit-requests",
    "anthropic-ratelimit-requests-limit",
)


def has_rate_limit_headers(headers: Mapping[str, str]) -> bool:
    """Whether parsing is worth it. Most answers carry none: one pass over the names (every marker
    contains "ratelimit") settles that before the case-insensitive lookups."""
    if "ratelimit" not in " ".join(headers).lower():
        return False
    return any(name in headers for name in _MARKERS)


@dataclass(frozen=True, slots=True)
class WindowBlock:
    """Keep a key out until ``until`` (epoch s) because its ``axis`` window is spent."""

    axis: Axis
    until: float


def blocks_from_headers(readings: list[WindowReading], now: float) -> list[WindowBlock]:
    """Windows with nothing left and a believable reset."""
    out: list[WindowBlock] = []
    for r in readings:
        if r.remaining is not None and r.remaining <= 0 and r.reset_at is not None and now < r.reset_at <= now + _MAX_BLOCK_S:
            out.append(WindowBlock(r.axis, r.reset_at))
    return out


def blocks_from_text(limits: list[tuple[Axis, int]], now: float) -> list[WindowBlock]:
    """A 429 that states its limit: the rest of that window (a minute; a day until UTC midnight)."""
    out: list[WindowBlock] = []
    for axis, _ in limits:
        until = now + 60.0 if axis in ("rpm", "tpm") else (math.floor(now / _DAY) + 1) * _DAY
        out.append(WindowBlock(axis, until))
    return out


class LearnedLimits:
    """Per route label, the limits providers stated; merged over the configured ones on read."""

    def __init__(self) -> None:
        self._learned: dict[str, dict[str, int]] = {}
        self._effective: dict[str, ModelLimits] = {}

    def effective(self, route: ModelRoute) -> ModelLimits:
        """The configured limits with what was learned filled in or lowered (one dict lookup when
        nothing was learned for the route)."""
        merged = self._effective.get(route.label)
        return route.limits if merged is None else merged

    def learn(self, route: ModelRoute, axis: Axis, value: int, *, only_lower: bool = False) -> bool:
        """Record ``value`` for ``axis``. Header readings replace an earlier learned value (the provider's
        current statement); text readings (``only_lower``) only ever lower it. True when it changed."""
        if value <= 0:
            return False
        known = self._learned.setdefault(route.label, {})
        old = known.get(axis)
        new = min(old, value) if (only_lower and old is not None) else value
        if new == old:
            return False
        known[axis] = new
        self._effective[route.label] = _merge(route.limits, known)
        return True

    def learn_headers(self, route: ModelRoute, readings: list[WindowReading]) -> bool:
        changed = False
        for r in readings:
            if r.limit is not None:
                changed |= self.learn(route, r.axis, r.limit)
        return changed

    def learn_text(self, route: ModelRoute, limits: list[tuple[Axis, int]]) -> bool:
        changed = False
        for axis, value in limits:
            changed |= self.learn(route, axis, value, only_lower=True)
        return changed

    def learned(self, label: str) -> dict[str, int]:
        return dict(self._learned.get(label, {}))

    def dump(self) -> str:
        return orjson.dumps(self._learned).decode()

    def load(self, raw: str | None, routes: Mapping[str, ModelRoute]) -> None:
        """Restore a :meth:`dump`; entries for routes no longer configured, or unreadable, are dropped."""
        for label, axes in (setting_object(raw) or {}).items():
            route = routes.get(str(label).lower())
            if route is None or not isinstance(axes, dict):
                continue
            for axis, value in axes.items():
                if axis in ("rpm", "rpd", "tpm", "tpd") and isinstance(value, int) and not isinstance(value, bool):
                    self.learn(route, axis, value)


def _merge(configured: ModelLimits, learned: dict[str, int]) -> ModelLimits:
    values: dict[str, int | None] = {}
    for axis in ("rpm", "rpd", "tpm", "tpd"):
        mine: int | None = getattr(configured, axis)
        theirs = learned.get(axis)
        values[axis] = theirs if mine is None else (mine if theirs is None else min(mine, theirs))
    return ModelLimits(**values)


def readings(headers: Mapping[str, str] | None, now: float) -> list[WindowReading]:
    """The windows in ``headers`` ([] fast when there are none)."""
    if headers is None or not has_rate_limit_headers(headers):
        return []
    return parse_rate_limit_headers(headers, now)


def text_limits(message: str) -> list[tuple[Axis, int]]:
    return parse_limit_text(message)
