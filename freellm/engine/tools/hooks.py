"""The pump's tool hooks for one request: rescue, repair, optional validation and JSON enforcement.

:func:`pump_hooks` is called by the driver for each attempt; it only closes over the request's declared
schemas (cached on the request) and the settings, so it costs a few attribute reads. Every hook runs once,
at the end of the turn (:meth:`~freellm.engine.pump.StreamPump.finish`), never per chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from freellm.config import ToolsConfig
from freellm.core.request import ChatRequest
from freellm.engine.pump import CheckTextFn, RepairFn, Rescue, RescueFn, ToolCall, ValidateFn
from freellm.engine.tools.repair import repair_calls
from freellm.engine.tools.rescue import rescue_inline_tool_calls
from freellm.engine.tools.structured import enforce_json
from freellm.engine.tools.validate import tool_arguments_problem

__all__ = ["PumpHooks", "pump_hooks"]


@dataclass(frozen=True, slots=True)
class PumpHooks:
    """Keyword arguments for :class:`~freellm.engine.pump.StreamPump` (see its constructor)."""

    rescue: RescueFn
    repair: RepairFn
    validate: ValidateFn | None
    check_text: CheckTextFn | None
    tool_names: frozenset[str]
    hold_all: bool
    think_tags: bool


def pump_hooks(req: ChatRequest, cfg: ToolsConfig, *, streaming: bool) -> PumpHooks:
    """The hooks for one attempt of ``req``; ``streaming`` is whether the client gets a stream."""
    schemas: Mapping[str, Mapping[str, Any]] = req.tool_schemas

    def rescue(text: str) -> Rescue:
        return rescue_inline_tool_calls(text, schemas)

    def repair(calls: list[ToolCall]) -> list[ToolCall]:
        return repair_calls(calls, schemas) if schemas and cfg.repair_arguments else calls

    validate: ValidateFn | None = None
    if cfg.strict_validation and schemas:

        def validate(calls: list[ToolCall]) -> str | None:
            return tool_arguments_problem(calls, schemas)

    check_text: CheckTextFn | None = None
    fmt = req.response_format
    enforce = fmt is not None and fmt.type in ("json_object", "json_schema") and cfg.enforce_response_format
    if enforce and fmt is not None:
        raw = fmt.json_schema.get("schema") if fmt.json_schema else None
        json_schema = raw if isinstance(raw, Mapping) and raw else None
        strict = cfg.strict_validation

        def check_text(text: str, finish_reason: str | None) -> str:
            return enforce_json(text, finish_reason, schema=json_schema, strict=strict)

    return PumpHooks(
        rescue=rescue,
        repair=repair,
        validate=validate,
        check_text=check_text,
        tool_names=frozenset(schemas) if req.wants_tools else frozenset(),
        # A non-stream reply is never sent mid-turn, so holding it costs nothing; a checked JSON stream
        # is held so that the check at its end can still fail over (docs/tools.md).
        hold_all=not streaming or (enforce and cfg.hold_json_streams),
        think_tags=cfg.think_tags,
    )
