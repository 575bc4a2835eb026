"""Provider kinds → classes. Later wires (gemini, anthropic) register here."""

from __future__ import annotations

import aiohttp

from freellm.config import ProviderConfig
from freellm.providers.base import Provider
from freellm.providers.openai_compat import OpenAICompatProvider

__all__ = ["build_providers"]


def build_providers(configs: list[ProviderConfig], session: aiohttp.ClientSession) -> dict[str, Provider]:
    providers: dict[str, Provider] = {}
    for cfg in configs:
        if cfg.kind == "openai":
            providers[cfg.name] = OpenAICompatProvider(cfg, session)
        else:
            raise NotImplementedError(f"provider kind {cfg.kind!r} ({cfg.name}) is not supported yet")
    return providers
