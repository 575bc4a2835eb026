"""Canonical sampling, ``response_format`` and ``reasoning_effort`` → Gemini ``generationConfig``.

Decisions (also in ``docs/providers.md``):

* **response_format** (only without function declarations — Gemini refuses JSON mode with function
  calling — and not for Gemma, which has no JSON mode): ``json_object`` → ``responseMimeType:
  application/json``; ``json_schema`` → the same plus a sanitised ``responseSchema``. Otherwise it becomes
  an instruction in the system text.
* **thinking** (``reasoning_effort``): Gemini 2.x ``thinkingBudget`` none/minimal 0 (2.5 Pro cannot turn
  thinking off: 128), low 1024, medium 8192, high 24576; Gemini 3 and later ``thinkingLevel`` (Flash:
  minimal/low/medium/high, Pro: low/high); ``includeThoughts: true`` whenever thinking is asked for; no
  ``thinkingConfig`` at all for Gemma or without ``reasoning_effort``. Gemini counts thought tokens in
  ``maxOutputTokens``, so with thinking on the budget is added to the client's ``max_tokens``.
* **sampling**: ``temperature``, ``top_p`` → ``topP``, ``top_k`` → ``topK``, ``max_tokens`` (or
  ``max_completion_tokens``) → ``maxOutputTokens``, ``stop`` → ``stopSequences`` (at most 5, empty ones
  dropped), ``seed``, ``presence_penalty``/``frequency_penalty`` → ``presencePenalty``/
  ``frequencyPenalty``. Not sent: ``min_p``, ``repetition_penalty``, ``logit_bias``, ``logprobs``,
  ``top_logprobs``, ``n``, ``user``, ``parallel_tool_calls``, ``stream_options`` and unknown extras.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.providers.gemini_wire.models import gemini_major, is_gemma
from freellm.providers.gemini_wire.schema import sanitize_schema

__all__ = ["MAX_STOP_SEQUENCES", "THINKING_BUDGETS", "apply_response_format", "apply_sampling"]

THINKING_BUDGETS: Final[dict[str, int]] = {
    "none": 0,
    "minimal": 0,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
}
"""``reasoning_effort`` → ``thinkingBudget`` (the reference data's Google quirk)."""
_PRO_MIN_BUDGET: Final = 128  # Gemini 2.5 Pro: "Budget 0 is invalid. This model only works in thinking mode."
_LEVELS_FLASH: Final = {
    "none": "minimal",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
_LEVELS_PRO: Final = {"none": "low", "minimal": "low", "low": "low", "medium": "high", "high": "high"}
_NO_THOUGHTS: Final = frozenset({"none", "minimal"})
MAX_STOP_SEQUENCES: Final = 5
_JSON_ONLY: Final = "Respond only with a single valid JSON object, with no text or markdown around it."


def apply_response_format(fmt: Any, generation: dict[str, Any], as_text: bool) -> str | None:
    """Set JSON mode on ``generation``; with ``as_text`` return a system-text hint instead."""
    if not isinstance(fmt, Mapping):
        return None
    kind = fmt.get("type")
    if kind not in ("json_object", "json_schema"):
        return None
    schema: Any = None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if as_text:
        if isinstance(schema, Mapping) and schema:
            return f"{_JSON_ONLY} It must match this JSON schema: {orjson.dumps(schema).decode()}"
        return _JSON_ONLY
    generation["responseMimeType"] = "application/json"
    if isinstance(schema, Mapping) and schema:
        clean = sanitize_schema(schema)
        if clean and not (clean.get("type") == "object" and "properties" not in clean):
            generation["responseSchema"] = clean
    return None


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def apply_sampling(body: Mapping[str, Any], generation: dict[str, Any], model: str) -> None:
    """Set sampling, ``maxOutputTokens`` and ``thinkingConfig`` on ``generation``."""
    for src, dst in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ):
        value = _number(body.get(src))
        if value is not None:
            generation[dst] = value
    for src, dst in (("top_k", "topK"), ("seed", "seed")):
        value = body.get(src)
        if isinstance(value, int) and not isinstance(value, bool):
            generation[dst] = value
    stop = body.get("stop")
    seqs = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    seqs = [s for s in seqs if isinstance(s, str) and s][:MAX_STOP_SEQUENCES]
    if seqs:
        generation["stopSequences"] = seqs

    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        max_tokens = body.get("max_completion_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        max_tokens = None
    thinking, extra = _thinking(body.get("reasoning_effort"), model)
    if max_tokens is not None:
        generation["maxOutputTokens"] = max_tokens + extra
    if thinking is not None:
        generation["thinkingConfig"] = thinking


def _thinking(effort: Any, model: str) -> tuple[dict[str, Any] | None, int]:
    """``(thinkingConfig, tokens to add to maxOutputTokens)`` for a ``reasoning_effort``."""
    if not isinstance(effort, str) or effort not in THINKING_BUDGETS or is_gemma(model):
        return None, 0
    lowered = model.lower()
    major = gemini_major(model)
    config: dict[str, Any]
    extra = THINKING_BUDGETS[effort]
    if major is not None and major >= 3:
        levels = _LEVELS_PRO if "-pro" in lowered else _LEVELS_FLASH
        config = {"thinkingLevel": levels[effort]}
    else:
        budget = THINKING_BUDGETS[effort]
        if budget == 0 and "2.5-pro" in lowered:
            budget = _PRO_MIN_BUDGET
        config = {"thinkingBudget": budget}
        extra = budget
    if effort not in _NO_THOUGHTS:
        config["includeThoughts"] = True
    return config, extra
