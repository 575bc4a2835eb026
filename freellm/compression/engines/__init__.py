"""One module per engine. Each exposes ``ID``, ``LOSSY``, a pydantic ``Params`` model of its tunables
(snake_case, the spec's defaults) and ``run(messages, ctx, params) -> EngineResult``; it returns the same
message objects for what it leaves alone and never mutates its input."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["EngineParams"]


class EngineParams(BaseModel):
    """Base of every engine's tunables: unknown names are an error, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
