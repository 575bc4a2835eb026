"""Ids of responses and their output items (``resp_…``, ``msg_…``, ``rs_…``, ``fc_…``).

Everything that mints an id takes an :data:`IdFactory`, so golden tests can inject
:class:`SequentialIds` and compare exact frames.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

__all__ = ["IdFactory", "SequentialIds", "random_id"]

IdFactory = Callable[[str], str]
"""``prefix -> id``, e.g. ``"msg" -> "msg_3f2a…"``."""


def random_id(prefix: str) -> str:
    """``<prefix>_<48 hex>``, the length OpenAI's own ids have."""
    return f"{prefix}_{secrets.token_hex(24)}"


class SequentialIds:
    """Deterministic ids for tests: ``msg_0001``, ``fc_0002``… (one counter over every prefix)."""

    def __init__(self) -> None:
        self._n = 0

    def __call__(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n:04d}"
