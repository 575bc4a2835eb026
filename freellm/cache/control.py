"""Whether one request uses the response cache: the config's default, the ``X-FreeLLM-Cache`` header
and ``Cache-Control`` (the issue's contract).

``X-FreeLLM-Cache: on|yes|1|true|force`` turns the cache on for this request even when the config has
it off; ``off|no|0|false|bypass|skip`` — or ``Cache-Control: no-store`` / ``no-cache`` — turns it off.
Any other value is the default: a malformed header is never an error.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["CacheChoice", "cache_choice"]

_ON = frozenset({"on", "yes", "1", "true", "force"})
_OFF = frozenset({"off", "no", "0", "false", "bypass", "skip"})
_NO_STORE = frozenset({"no-store", "no-cache"})


class CacheChoice(Enum):
    OFF = "off"
    """The cache plays no part: no lookup, no store, no ``X-FreeLLM-Cache`` header."""
    BYPASS = "bypass"
    """The cache is on but this request skips it (header, Cache-Control): neither served nor stored."""
    USE = "use"
    """Look up, and store a complete answer."""


def cache_choice(enabled: bool, header: str | None, cache_control: str | None) -> CacheChoice:
    """The choice for one request. ``header`` is ``X-FreeLLM-Cache``, ``cache_control`` the request's
    ``Cache-Control`` (either may be None)."""
    on = enabled
    explicit_off = False
    if header is not None:
        value = header.strip().lower()
        if value in _ON:
            on = True
        elif value in _OFF:
            explicit_off = True
    if cache_control is not None and any(
        d.strip().lower() in _NO_STORE for d in cache_control.split(",")
    ):
        explicit_off = True
    if not on:
        return CacheChoice.OFF
    return CacheChoice.BYPASS if explicit_off else CacheChoice.USE
