"""Prompt compression (docs/compression.md): pure engines behind a fail-open fidelity gate.

Public API: :class:`Compressor` (one per app), :class:`CompressionOutcome`, :class:`StageReport`,
:func:`resolve_mode` / :class:`ResolvedMode` and the engine ids / mode sets.
"""

from freellm.compression.compressor import COMPRESSION_VERSION, CompressionOutcome, Compressor, StageReport
from freellm.compression.modes import MODE_RANK, ModeName, ResolvedMode, resolve_mode
from freellm.compression.registry import ENGINE_IDS, MODE_ENGINES

__all__ = [
    "COMPRESSION_VERSION",
    "ENGINE_IDS",
    "MODE_ENGINES",
    "MODE_RANK",
    "CompressionOutcome",
    "Compressor",
    "ModeName",
    "ResolvedMode",
    "StageReport",
    "resolve_mode",
]
