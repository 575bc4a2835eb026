"""In-memory compression statistics (no message bodies, ever)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from freellm.compression.registry import ENGINE_IDS

__all__ = ["Stats"]

_DISCARDS = frozenset({"inflation", "fidelity", "exception"})


class Stats:
    __slots__ = ("_by_mode", "_chars_after", "_chars_before", "_compressed", "_duration_ms", "_engines", "_requests")

    def __init__(self) -> None:
        self._requests = 0
        self._compressed = 0
        self._chars_before = 0
        self._chars_after = 0
        self._duration_ms = 0.0
        self._by_mode: dict[str, dict[str, int]] = {}
        self._engines: dict[str, dict[str, int]] = {
            e: {"applied": 0, "discarded": 0, "saved_chars": 0} for e in ENGINE_IDS
        }

    def record(
        self,
        *,
        mode: str,
        chars_before: int,
        chars_after: int,
        stages: Iterable[tuple[str, str, int]],
        duration_ms: float,
    ) -> None:
        changed = chars_after < chars_before
        self._requests += 1
        self._compressed += changed
        self._chars_before += chars_before
        self._chars_after += chars_after
        self._duration_ms += duration_ms
        by = self._by_mode.setdefault(mode, {"requests": 0, "compressed": 0, "saved_chars": 0})
        by["requests"] += 1
        by["compressed"] += changed
        by["saved_chars"] += chars_before - chars_after
        for engine, reason, saved in stages:
            e = self._engines[engine]
            if reason == "applied":
                e["applied"] += 1
                e["saved_chars"] += saved
            elif reason in _DISCARDS:
                e["discarded"] += 1

    def snapshot(self, filter_errors: list[str]) -> dict[str, Any]:
        saved = self._chars_before - self._chars_after
        return {
            "requests": self._requests,
            "compressed": self._compressed,
            "chars_before": self._chars_before,
            "chars_after": self._chars_after,
            "est_saved_tokens": saved // 4,
            "savings_percent": round(100.0 * saved / self._chars_before, 2) if self._chars_before else 0.0,
            "avg_duration_ms": round(self._duration_ms / self._requests, 3) if self._requests else 0.0,
            "by_mode": {k: dict(v) for k, v in self._by_mode.items()},
            "engines": {k: dict(v) for k, v in self._engines.items()},
            "filter_errors": list(filter_errors),
        }
