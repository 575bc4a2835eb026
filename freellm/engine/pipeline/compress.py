"""Prompt compression (seed §12): the first stage, so everything after it — estimate, budget, cache key,
routing — sees the request as it will go upstream.

The effective mode comes from the operator's ``compression`` config and the request's
``X-FreeLLM-Compress`` header (:func:`freellm.compression.resolve_mode`: the header can only lower the
mode, ``off`` is the operator's master switch, a large request may auto-trigger ``aggressive``). Only the
outbound copy is rewritten: what a Responses chain or a session stores is built from the client's input,
never from this.
"""

from __future__ import annotations

from freellm.compression import Compressor, resolve_mode
from freellm.config import CompressionConfig
from freellm.core.tokens import estimate_input_tokens
from freellm.engine.context import CompressionReport, RequestContext
from freellm.engine.pipeline import Draft

__all__ = ["CompressStage"]

_OFF_REPORT = CompressionReport(mode="off", saved_tokens=0, fingerprint="off")


class CompressStage:
    name = "compress"

    def __init__(self, compressor: Compressor, config: CompressionConfig, *, image_tokens: int) -> None:
        self._compressor = compressor
        self._config = config
        self._image_tokens = image_tokens

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft:
        if not ctx.compressible:
            return draft
        req = draft.req
        estimate = estimate_input_tokens(req, image_tokens=self._image_tokens)
        resolved = resolve_mode(self._config, ctx.compress_header, estimate)
        if not resolved.looked:
            return draft
        if not resolved.active:
            ctx.compression = _OFF_REPORT
            return draft
        messages = [m.wire() for m in req.messages]
        compressor = self._compressor
        outcome = compressor.compress(
            messages, mode=resolved.mode, target_tokens=resolved.target_tokens, record=not ctx.counting
        )
        ctx.compression = CompressionReport(
            mode=resolved.mode, saved_tokens=outcome.saved_tokens, fingerprint=compressor.fingerprint(resolved.mode)
        )
        if not outcome.changed:
            return draft
        return Draft(req.replace(messages=outcome.messages), draft.plan, draft.needs)
