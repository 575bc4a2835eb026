"""Settings of the inbound surfaces other than OpenAI chat: Anthropic, Gemini, Responses, Completions,
Ollama and embeddings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from freellm.config_base import ConfigModel as _Model

__all__ = [
    "AnthropicSurfaceConfig",
    "CompletionsSurfaceConfig",
    "EmbeddingsConfig",
    "GeminiSurfaceConfig",
    "OllamaConfig",
    "ResponsesSurfaceConfig",
    "SurfacesConfig",
]


class AnthropicSurfaceConfig(_Model):
    """``/v1/messages``: Claude model names never 404; they map to a route, a group or ``auto``."""

    model_map: dict[str, str] = Field(
        default_factory=lambda: {"opus": "auto", "sonnet": "auto", "haiku": "auto", "default": "auto"}
    )
    """Family (substring of the requested name, e.g. ``opus``) → model to route to; ``default`` for the rest."""


class ResponsesSurfaceConfig(_Model):
    """``/v1/responses``: stored responses for ``previous_response_id`` chaining."""

    store_ttl_days: float = 30.0
    max_chain_depth: int = 256


class CompletionsSurfaceConfig(_Model):
    """Legacy ``/v1/completions``."""

    default_max_tokens: int = 128


class GeminiSurfaceConfig(_Model):
    """``/v1beta/models/…`` and ``/v1/models/…:generateContent``: Gemini model names never 404; they map
    to a route, a group or ``auto`` by family."""

    model_map: dict[str, str] = Field(
        default_factory=lambda: {"flash-lite": "auto", "flash": "auto", "pro": "auto", "default": "auto"}
    )
    """Family (substring of the requested name, e.g. ``flash-lite``; the longest match wins) → model to
    route to; ``default`` for the rest."""
    default_max_output_tokens: int | None = 8192
    """``max_tokens`` sent when the request has no ``generationConfig.maxOutputTokens`` (None: leave unset)."""


class OllamaConfig(_Model):
    mode: Literal["off", "loopback", "key"] = "loopback"
    """Who may use the Ollama routes under ``/api/`` (docs/surfaces/ollama.md): ``off`` — none (404);
    ``loopback`` — only this machine, no key (a peer or a forwarded client elsewhere gets 403), as a
    local Ollama server is; ``key`` — anyone with a client key (401 otherwise)."""
    default_max_tokens: int = Field(default=1024, ge=1)
    """The output cap when ``options.num_predict`` is absent or negative (Ollama's "until done")."""


class EmbeddingsConfig(_Model):
    """``/v1/embeddings`` (and the Gemini and Ollama embedding routes): docs/embeddings.md."""

    default_family: str | None = None
    """The family ``auto`` (or no model) means; default: the first family declared."""
    max_inputs: int = Field(default=2048, ge=1)
    """Inputs one request may carry (OpenAI's own limit)."""


class SurfacesConfig(_Model):
    anthropic: AnthropicSurfaceConfig = Field(default_factory=AnthropicSurfaceConfig)
    gemini: GeminiSurfaceConfig = Field(default_factory=GeminiSurfaceConfig)
    responses: ResponsesSurfaceConfig = Field(default_factory=ResponsesSurfaceConfig)
    completions: CompletionsSurfaceConfig = Field(default_factory=CompletionsSurfaceConfig)
