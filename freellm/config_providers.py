"""Settings of the upstreams: providers, their keys and their models (chat and embedding)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from freellm.config_base import ConfigModel as _Model

__all__ = ["ModelConfig", "ModelKind", "ModelLimits", "ModelTier", "ProviderConfig"]


class ModelLimits(_Model):
    """Free-tier limits of one model on one key; ``None`` means no figure is known."""

    rpm: int | None = None
    rpd: int | None = None
    tpm: int | None = None
    tpd: int | None = None


ModelTier = Literal["frontier", "large", "medium", "small"]
ModelKind = Literal["chat", "embedding"]


class ModelConfig(_Model):
    id: str
    kind: ModelKind = "chat"
    """``embedding``: served by ``/v1/embeddings`` (and the Gemini and Ollama embedding routes) only,
    never routed for chat."""
    family: str | None = None
    """An embedding model's family (default: its id): a request names the family, and failover stays
    inside it, because vectors of different families are not comparable."""
    dimensions: int | None = Field(default=None, ge=1)
    """An embedding model's native vector length (listed; a request may ask for fewer)."""
    display_name: str | None = None
    context_window: int | None = None
    tools: bool = True
    vision: bool = False
    enabled: bool = True
    limits: ModelLimits = Field(default_factory=ModelLimits)
    tier: ModelTier | None = None
    """How capable the model is, for the ``smart`` strategy (the built-in catalog's size)."""
    rank: int | None = Field(default=None, ge=1)
    """1 = the best model; orders models of one tier for ``smart``."""

    @field_validator("tier", mode="before")
    @classmethod
    def _tier_any_case(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _family_only_for_embeddings(self) -> ModelConfig:
        if self.kind == "chat" and self.family is not None:
            raise ValueError(f"model {self.id!r}: 'family' applies to embedding models only (kind: embedding)")
        if self.family is not None and not self.family.strip():
            raise ValueError(f"model {self.id!r}: 'family' must not be empty")
        return self

    @property
    def embedding_family(self) -> str:
        """The family an embedding model belongs to: its ``family``, else its id."""
        return (self.family or self.id).strip()


class ProviderConfig(_Model):
    name: str
    kind: Literal["openai", "gemini", "anthropic"] = "openai"
    base_url: str
    keys: list[str] = Field(default_factory=list)
    models: list[ModelConfig] = Field(default_factory=list)
    enabled: bool = True
    timeout_s: float = 60.0
    """First-byte timeout for this provider's requests (the reference's per-platform chat timeout)."""
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name_has_no_slash(cls, v: str) -> str:
        if not v or "/" in v or ":" in v:
            raise ValueError("provider name must be non-empty and contain no '/' or ':'")
        return v

    @model_validator(mode="after")
    def _embeddings_need_an_embedding_wire(self) -> ProviderConfig:
        if self.kind == "anthropic" and any(m.kind == "embedding" for m in self.models):
            raise ValueError(f"provider {self.name!r}: the anthropic wire has no embeddings (kind: embedding)")
        return self

    @field_validator("keys")
    @classmethod
    def _drop_empty_keys(cls, v: list[str]) -> list[str]:
        # An unset ${VAR} substitutes to "": such a key simply isn't configured.
        return [k for k in v if k.strip()]
