"""The Ollama API surface (``/api/``): docs/surfaces/ollama.md."""

from freellm.surfaces.ollama.http import register

__all__ = ["register"]
