"""Provider kinds → classes: ``openai``, ``anthropic`` and ``gemini``."""

from __future__ import annotations

import aiohttp

from freellm.config import ProviderConfig
from freellm.providers.anthropic import AnthropicProvider
from freellm.providers.base import Provider
from freellm.providers.gemini import GeminiProvider
from freellm.providers.openai_compat import OpenAICompatProvider

__all__ = ["build_providers"]


def build_providers(configs: list[ProviderConfig], session: aiohttp.ClientSession) -> dict[str, Provider]:
    providers: dict[str, Provider] = {}
    for cfg in configs:
        if cfg.kind == "openai":
            providers[cfg.name] = OpenAICompatProvider(cfg, session)
        elif cfg.kind == "anthropic":
            providers[cfg.name] = AnthropicProvider(cfg, session)
        elif cfg.kind == "gemini":
            providers[cfg.name] = GeminiProvider(cfg, session)
        else:
            raise NotImplementedError(f"provider kind {cfg.kind!r} ({cfg.name}) is not supported yet")
    return providers
