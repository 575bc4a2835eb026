"""Key health: what the gateway knows about each provider key, and the rules that change it.

``unknown`` (never checked) and ``healthy`` keys serve; ``error``, ``invalid`` and ``disabled`` ones do
not (spec/core.md §10). The key health pass (:mod:`freellm.routing.probes`) checks keys with a cheap
request: a 401/403 makes a key ``invalid`` (re-checked on every pass) and ``disable_after`` of those in
a row disable it; a 2xx makes it ``healthy``; a transport error changes nothing. A served request
moves a key from ``error`` back to ``healthy`` (never from ``invalid``: a working request with a key
the provider rejected days ago is not proof enough for the next check to be skipped).

Statuses are per process and persisted through the store's settings, so a disabled key stays disabled
across a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import orjson

from freellm.store.base import setting_object

__all__ = ["HEALTH_SETTING", "KeyHealth", "KeyStatus"]

KeyStatus = Literal["unknown", "healthy", "error", "invalid", "disabled"]
_STATUSES: Mapping[str, KeyStatus] = MappingProxyType(
    {s: s for s in ("unknown", "healthy", "error", "invalid", "disabled")}
)
_SERVING: frozenset[str] = frozenset({"unknown", "healthy"})

HEALTH_SETTING = "key_health"


@dataclass(slots=True)
class _KeyState:
    status: KeyStatus = "unknown"
    failures: int = 0
    """Consecutive 401/403 answers to the health check."""
    checked_at: float = 0.0
    reason: str = ""


class KeyHealth:
    def __init__(self, disable_after: int = 3) -> None:
        self._disable_after = disable_after
        self._keys: dict[tuple[str, str], _KeyState] = {}

    def status(self, provider: str, key_id: str) -> KeyStatus:
        state = self._keys.get((provider, key_id))
        return state.status if state is not None else "unknown"

    def usable(self, provider: str, key_id: str) -> bool:
        state = self._keys.get((provider, key_id))
        return state is None or state.status in _SERVING

    def checked_at(self, provider: str, key_id: str) -> float:
        state = self._keys.get((provider, key_id))
        return state.checked_at if state is not None else 0.0

    def served(self, provider: str, key_id: str) -> bool:
        """A request succeeded with the key: ``error`` → ``healthy``. True when that changed it."""
        state = self._keys.get((provider, key_id))
        if state is None or state.status != "error":
            return False
        state.status, state.reason = "healthy", ""
        return True

    def mark_error(self, provider: str, key_id: str, reason: str) -> None:
        state = self._keys.setdefault((provider, key_id), _KeyState())
        if state.status not in ("invalid", "disabled"):
            state.status, state.reason = "error", reason

    def record_check(self, provider: str, key_id: str, status: int | None, now: float) -> bool:
        """The health check's answer (an HTTP status, None for a transport failure). True when the
        key's status changed."""
        state = self._keys.setdefault((provider, key_id), _KeyState())
        before = state.status
        state.checked_at = now
        if state.status == "disabled" or status is None:
            return False
        if status in (401, 403):
            state.failures += 1
            state.reason = f"HTTP {status} from the key check"
            state.status = "disabled" if state.failures >= self._disable_after else "invalid"
        elif 200 <= status < 300:
            state.failures, state.status, state.reason = 0, "healthy", ""
        return state.status != before

    def enable(self, provider: str, key_id: str) -> None:
        """An operator re-enabled the key: it starts over as ``unknown``."""
        self._keys.pop((provider, key_id), None)

    def dump(self) -> str:
        return orjson.dumps(
            {
                f"{p}\x1f{k}": [s.status, s.failures, s.checked_at, s.reason]
                for (p, k), s in self._keys.items()
                if s.status != "unknown"
            }
        ).decode()

    def load(self, raw: str | None) -> None:
        for name, value in (setting_object(raw) or {}).items():
            provider, _, key_id = str(name).partition("\x1f")
            if not key_id or not isinstance(value, list) or len(value) != 4:
                continue
            status, failures, checked_at, reason = value
            if not isinstance(status, str) or status not in _STATUSES:
                continue
            if (
                isinstance(failures, int)
                and not isinstance(failures, bool)
                and isinstance(checked_at, int | float)
                and isinstance(reason, str)
            ):
                self._keys[(provider, key_id)] = _KeyState(_STATUSES[status], failures, float(checked_at), reason)
