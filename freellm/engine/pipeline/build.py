"""The one place that lists the pipeline's stages, in the seed's order."""

from __future__ import annotations

from freellm.cache.store import ResponseCache
from freellm.compression import Compressor
from freellm.config import Settings
from freellm.engine.pipeline import Pipeline, Stage
from freellm.engine.pipeline.cache_lookup import CacheLookupStage
from freellm.engine.pipeline.compress import CompressStage
from freellm.engine.pipeline.gates import GatesStage
from freellm.routing.router import Router

__all__ = ["build_pipeline"]


def build_pipeline(
    settings: Settings, router: Router, *, compressor: Compressor | None, cache: ResponseCache | None
) -> Pipeline:
    """compress → (profile prompt, image shrink: coming) → estimate + gates → (budget: coming) → cache
    lookup → (session: coming). Compression is listed only when the operator configured a mode; the
    cache whenever it exists, because a request's own ``X-FreeLLM-Cache: on`` may turn it on."""
    stages: list[Stage] = []
    if compressor is not None and settings.compression.mode != "off":
        stages.append(
            CompressStage(compressor, settings.compression, image_tokens=settings.routing.image_token_estimate)
        )
    stages.append(GatesStage(settings, router))
    if cache is not None:
        stages.append(CacheLookupStage(cache))
    return Pipeline(stages)
