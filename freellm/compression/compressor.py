"""The prompt-compression service: one :class:`Compressor` per app runs the engines of a mode in order,
each behind the fidelity gate, and keeps the frozen-prompt memory and the statistics."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from freellm.compression.engines import EngineParams
from freellm.compression.filters import BUILTIN_RULES, CompiledRule, load_custom_filters
from freellm.compression.frozen import FrozenPrompts, cache_control_prefix
from freellm.compression.gate import check
from freellm.compression.registry import ENGINE_IDS, ENGINES, MODE_ENGINES
from freellm.compression.spancache import SpanCache
from freellm.compression.stats import Stats
from freellm.compression.types import EngineContext, Message, ToolCall, message_chars
from freellm.config import CompressionConfig, ConfigError

__all__ = ["COMPRESSION_VERSION", "CompressionOutcome", "Compressor", "StageReport"]

log = logging.getLogger("freellm.compression")

COMPRESSION_VERSION = "1"
"""Bumped whenever an engine's output for the same input changes (it is part of the fingerprint)."""


@dataclass(frozen=True, slots=True)
class StageReport:
    engine: str
    applied: bool
    reason: str
    """``applied`` | ``unchanged`` | ``inflation`` | ``fidelity`` | ``exception`` | ``disabled`` |
    ``target_reached`` | ``no_target`` (hard-budget without a target)."""
    saved_chars: int
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CompressionOutcome:
    mode: str
    messages: list[dict[str, Any]]
    """A new list; rewritten messages are new dicts, the others are the caller's (never mutated)."""
    chars_before: int
    chars_after: int
    stages: list[StageReport]

    @property
    def saved_chars(self) -> int:
        return self.chars_before - self.chars_after

    @property
    def saved_tokens(self) -> int:
        return max(0, self.saved_chars) // 4

    @property
    def changed(self) -> bool:
        return any(s.applied for s in self.stages)

    @property
    def header(self) -> str:
        """The ``X-FreeLLM-Compress`` response header value: ``<mode>; saved~=<tokens>``."""
        return f"{self.mode}; saved~={self.saved_tokens}"


def _tool_calls(messages: list[Message]) -> dict[str, ToolCall]:
    out: dict[str, ToolCall] = {}
    for i, m in enumerate(messages):
        calls = m.get("tool_calls")
        if not isinstance(calls, list):
            continue
        for pos, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            cid = call.get("id")
            fn = call.get("function")
            if not isinstance(cid, str) or not isinstance(fn, dict):
                continue
            name = fn.get("name") if isinstance(fn.get("name"), str) else ""
            raw = fn.get("arguments")
            arguments = raw if isinstance(raw, str) else ""
            args: dict[str, Any] | None = None
            if isinstance(raw, dict):
                args = raw
            elif arguments:
                try:
                    parsed = json.loads(arguments)
                except ValueError:
                    parsed = None
                args = parsed if isinstance(parsed, dict) else None
            out.setdefault(cid, ToolCall(cid, str(name), arguments, args, i, pos))
    return out


class Compressor:
    """Built once per app (it lives on the app; there is no module-level mutable state)."""

    def __init__(self, config: CompressionConfig, *, filters_dir: Path | None) -> None:
        self._config = config
        params: dict[str, EngineParams] = {}
        enabled: dict[str, bool] = {}
        for key in config.engines:
            if key not in ENGINE_IDS:
                raise ConfigError(
                    f"compression.engines: unknown engine {key!r} (known: {', '.join(ENGINE_IDS)})"
                )
        for spec in ENGINES:
            cfg = config.engines.get(spec.id)
            extra = dict(cfg.model_extra or {}) if cfg is not None else {}
            try:
                params[spec.id] = spec.params.model_validate(extra)
            except ValidationError as exc:
                lines = [
                    f"  compression.engines.{spec.id}.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}"
                    for e in exc.errors()
                ]
                raise ConfigError("compression config is invalid:\n" + "\n".join(lines)) from exc
            enabled[spec.id] = cfg.enabled if cfg is not None else True
        self._params = params
        self._enabled = enabled
        custom, errors = load_custom_filters(filters_dir)
        self._filters: tuple[CompiledRule, ...] = (*custom, *BUILTIN_RULES)
        self._filter_errors = errors
        self._frozen = FrozenPrompts()
        self._stats = Stats()
        base = {
            "version": COMPRESSION_VERSION,
            "config": config.model_dump(mode="json"),
            "engines": {k: {"enabled": enabled[k], **p.model_dump(mode="json")} for k, p in params.items()},
            "custom_filters": [r.rule.model_dump(mode="json") for r in custom],
        }
        self._fingerprints = {
            mode: hashlib.sha256(orjson.dumps({**base, "mode": mode}, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
            for mode in MODE_ENGINES
        }

    @property
    def config(self) -> CompressionConfig:
        return self._config

    @property
    def filter_errors(self) -> list[str]:
        """``"<file name>: <reason>"`` for every custom filter file that was skipped (or cut short)."""
        return list(self._filter_errors)

    @property
    def filters(self) -> tuple[CompiledRule, ...]:
        """toolfilter's rules in matching order: custom, then built-in."""
        return self._filters

    def fingerprint(self, mode: str) -> str:
        """A short stable hex digest of {version, effective mode, full config incl. custom filters}."""
        try:
            return self._fingerprints[mode]
        except KeyError:
            raise ValueError(f"unknown compression mode {mode!r}") from None

    def compress(
        self,
        messages: list[dict[str, Any]],
        *,
        mode: str,
        target_tokens: int | None = None,
        record: bool = True,
        cache_prefix: int | None = None,
    ) -> CompressionOutcome:
        """Compress canonical chat messages with ``mode``'s engines.

        ``target_tokens``: stop once the request is at most 4 x that many characters (and gives
        hard-budget its goal). ``record=False`` (the admin preview) touches neither the statistics nor
        the frozen-prompt memory. ``cache_prefix``: how many leading messages lossy engines must leave
        alone; default: through the last message carrying ``cache_control``.
        """
        if mode not in MODE_ENGINES:
            raise ValueError(f"unknown compression mode {mode!r}")
        started = time.perf_counter()
        wanted = MODE_ENGINES[mode]
        work: list[Message | None] = list(messages)
        chars_before = sum(message_chars(m) for m in messages)
        if not wanted:
            return CompressionOutcome(mode, list(messages), chars_before, chars_before, [])
        frozen = self._frozen.frozen(messages, record=record) if self._config.prefix_freeze else frozenset()
        prefix = cache_control_prefix(messages) if cache_prefix is None else max(0, cache_prefix)
        lossy_locked = frozen | frozenset(range(min(prefix, len(messages))))
        target_chars = 4 * target_tokens if target_tokens is not None else None
        calls = _tool_calls(messages)
        cache = SpanCache()
        current = chars_before
        stages: list[StageReport] = []
        for spec in ENGINES:
            if spec.id not in wanted:
                continue
            if not self._enabled[spec.id]:
                stages.append(StageReport(spec.id, False, "disabled", 0))
                continue
            if target_chars is not None and current <= target_chars:
                stages.append(StageReport(spec.id, False, "target_reached", 0))
                continue
            if spec.id == "hard-budget" and target_chars is None:
                stages.append(StageReport(spec.id, False, "no_target", 0))
                continue
            ctx = EngineContext(
                mode=mode,
                locked=lossy_locked if spec.lossy else frozen,
                target_chars=target_chars,
                calls=calls,
                filters=self._filters,
            )
            try:
                result = spec.run(work, ctx, self._params[spec.id])
                if len(result.messages) != len(work):
                    raise ValueError("engine changed the number of message slots")
                verdict = check(work, result.messages, result.dropped, cache)
            except Exception as exc:  # fail open: the request goes on as it was
                # the exception's type only: its message could quote the prompt
                log.warning("compression engine %s failed (%s); its output was discarded", spec.id, type(exc).__name__)
                stages.append(StageReport(spec.id, False, "exception", 0, type(exc).__name__))
                continue
            if not verdict.ok:
                stages.append(StageReport(spec.id, False, verdict.reason, 0, verdict.detail))
                continue
            after = current + verdict.delta  # unchanged slots keep their size
            stages.append(StageReport(spec.id, True, "applied", current - after))
            work = result.messages
            current = after
        out = [m for m in work if m is not None]
        outcome = CompressionOutcome(mode, out, chars_before, current, stages)
        if record:
            self._stats.record(
                mode=mode,
                chars_before=chars_before,
                chars_after=current,
                stages=[(s.engine, s.reason, s.saved_chars) for s in stages],
                duration_ms=(time.perf_counter() - started) * 1000.0,
            )
        return outcome

    def stats(self) -> dict[str, Any]:
        """Counters since start: requests, compressed, chars, per-engine applied/discarded/saved, by mode."""
        return self._stats.snapshot(self._filter_errors)
