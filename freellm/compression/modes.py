"""Which mode a request is compressed with: the operator's config, the ``X-FreeLLM-Compress`` header and
the auto-trigger, resolved by one pure function.

| header (trimmed, any case)           | effect                                                     |
|--------------------------------------|------------------------------------------------------------|
| absent, empty, unrecognised          | the configured mode (auto-trigger applies)                 |
| ``on`` ``yes`` ``1`` ``true``        | the configured mode (auto-trigger applies)                 |
| ``off`` ``no`` ``0`` ``false`` ``bypass`` ``skip`` | off for this request                         |
| ``lossless`` ``standard`` ``aggressive`` | that mode if not stronger than the configured one, else the configured one |

Operator ``mode: off`` is a master switch: the request is not looked at (``looked=False``, no response
header). Auto-trigger: configured mode ≠ off, header absent/on, estimate ≥ ``auto_trigger_tokens`` →
``aggressive`` with target ``target_tokens`` or floor(0.9 x trigger).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from freellm.config import CompressionConfig

__all__ = ["MODE_RANK", "ModeName", "ResolvedMode", "resolve_mode"]

ModeName = Literal["off", "lossless", "standard", "aggressive"]

MODE_RANK: dict[str, int] = {"off": 0, "lossless": 1, "standard": 2, "aggressive": 3}
_OFF_WORDS = frozenset({"off", "no", "0", "false", "bypass", "skip"})
_ON_WORDS = frozenset({"on", "yes", "1", "true"})


@dataclass(frozen=True, slots=True)
class ResolvedMode:
    mode: ModeName
    target_tokens: int | None
    active: bool
    """The compressor should run (mode ≠ off)."""
    looked: bool = True
    """Compression considered the request (False only under the operator's master ``off``: no header)."""
    auto: bool = False
    """The auto-trigger chose ``aggressive``."""

    @property
    def header_off(self) -> str:
        """The response header for a request compression looked at but did not compress."""
        return "off; saved~=0"


_MASTER_OFF = ResolvedMode("off", None, active=False, looked=False)
_REQUEST_OFF = ResolvedMode("off", None, active=False, looked=True)


def resolve_mode(config: CompressionConfig, header: str | None, estimated_tokens: int) -> ResolvedMode:
    configured = config.mode
    if configured == "off":
        return _MASTER_OFF
    word = header.strip().lower() if header else ""
    if word in _OFF_WORDS:
        return _REQUEST_OFF
    if word in ("lossless", "standard", "aggressive"):
        mode = word if MODE_RANK[word] <= MODE_RANK[configured] else configured
        return ResolvedMode(cast(ModeName, mode), config.target_tokens, active=True)
    trigger = config.auto_trigger_tokens
    if trigger is not None and estimated_tokens >= trigger:
        target = config.target_tokens if config.target_tokens is not None else (9 * trigger) // 10
        return ResolvedMode("aggressive", max(1, target), active=True, auto=True)
    return ResolvedMode(configured, config.target_tokens, active=True)
