"""The one place that lists the pipeline's stages, in the seed's order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from freellm.cache.store import ResponseCache
from freellm.config import Settings
from freellm.engine.pipeline import Pipeline, Stage
from freellm.engine.pipeline.budget import BudgetStage
from freellm.engine.pipeline.cache_lookup import CacheLookupStage
from freellm.engine.pipeline.gates import GatesStage
from freellm.engine.pipeline.images import ImageStage
from freellm.engine.pipeline.profile import ProfileStage
from freellm.engine.pipeline.session import SessionStage
from freellm.routing.router import Router
from freellm.routing.sessions import SessionMemory

if TYPE_CHECKING:
    from freellm.compression import Compressor

__all__ = ["build_pipeline"]


def build_pipeline(
    settings: Settings,
    router: Router,
    *,
    compressor: Compressor | None,
    cache: ResponseCache | None,
    sessions: SessionMemory | None = None,
) -> Pipeline:
    """compress → profile prompt → image shrink → estimate + gates → budget → cache lookup → session.
    A stage whose feature is off is not listed (compression, profiles, budget); the cache is listed
    whenever it exists, because a request's own ``X-FreeLLM-Cache: on`` may turn it on."""
    stages: list[Stage] = []
    if compressor is not None and settings.compression.mode != "off":
        # Imported only here: the stage pulls in freellm.compression, which a gateway that does not
        # compress never loads.
        from freellm.engine.pipeline.compress import CompressStage

        stages.append(
            CompressStage(compressor, settings.compression, image_tokens=settings.routing.image_token_estimate)
        )
    if settings.profiles:
        stages.append(ProfileStage(settings.profiles))
    stages.append(ImageStage(settings.images))
    stages.append(GatesStage(settings, router))
    if settings.limits.request_max_tokens_budget > 0:
        stages.append(BudgetStage(settings.limits, image_tokens=settings.routing.image_token_estimate))
    if cache is not None:
        stages.append(CacheLookupStage(cache))
    if sessions is not None and _sessions_on(settings):
        stages.append(SessionStage(sessions))
    return Pipeline(stages)


def _sessions_on(settings: Settings) -> bool:
    s = settings.sessions
    return s.sticky or s.context_handoff != "off" or s.reasoning_memory
