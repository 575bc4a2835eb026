"""The embedded default catalog: well-known free-tier providers, switched on by their usual key variables.

``freellm serve`` without ``--config`` builds its settings here. The data lives in
``catalog_data/builtin_providers.json`` (a trimmed snapshot of the shared provider reference); every
value in it is a default that a YAML config can override (see ``docs/providers.md``).

Rules:

* Only providers whose wire this gateway speaks (:data:`SUPPORTED_WIRES`) and that need a key are
  candidates. Keyless providers (``auth: none``) are never enabled implicitly.
* A provider is enabled when at least one of its key variables is set: the data's ``api_key_env``
  (``GROQ_KEY``), the conventional ``<ID>_API_KEY`` (``GROQ_API_KEY``; not for cloudflare, whose
  ``CLOUDFLARE_API_KEY`` is a different credential), a few well-known aliases
  (``HF_TOKEN``, ``GITHUB_TOKEN``, ``CLOUDFLARE_API_TOKEN``, ...), and numbered variants of each
  (``GROQ_API_KEY_2``, ``GROQ_KEY_1``). Keys are stripped and de-duplicated, order preserved.
* ``{placeholder}`` parts of a base URL are filled from ``<ID>_<PLACEHOLDER>``
  (``CLOUDFLARE_ACCOUNT_ID``). With a single placeholder, keys written ``<value>:<token>`` (the
  FreeLLMAPI export format, e.g. ``CLOUDFLARE_KEY=<account_id>:<api_token>``) also supply it.
* The ``auto`` chain (:func:`builtin_chain`): enabled, tool-capable models, grouped by size tier
  (Frontier, Large, Medium, Small, then unknown); inside a tier providers take turns (round-robin),
  each provider's models in descending requests-per-day (unknown last), providers ordered by their best
  requests-per-day (unknown last) and then by catalog order. A tier does not start with the provider
  that ended the previous one when another provider is available.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from freellm.config import ModelConfig, ModelLimits, ProviderConfig

__all__ = [
    "SIZE_TIERS",
    "SUPPORTED_WIRES",
    "BuiltinLimits",
    "BuiltinModel",
    "BuiltinProvider",
    "builtin_catalog",
    "builtin_chain",
    "builtin_providers",
    "builtin_settings",
]

log = logging.getLogger(__name__)

SizeTier = Literal["Frontier", "Large", "Medium", "Small"]

SIZE_TIERS: tuple[SizeTier, ...] = ("Frontier", "Large", "Medium", "Small")
"""Capability tiers, best first (the data's ``size``)."""

SUPPORTED_WIRES: frozenset[str] = frozenset({"openai", "gemini"})
"""Wires the built-in catalog enables: OpenAI-compatible providers and Google AI Studio (``gemini``)."""

_DATA_PACKAGE = "freellm.routing"
_DATA_FILE = ("catalog_data", "builtin_providers.json")

_EXTRA_KEY_ENV: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "huggingface": ("HF_TOKEN",),
        "github": ("GITHUB_TOKEN",),
        "cloudflare": ("CLOUDFLARE_API_TOKEN",),
        "zhipu": ("ZHIPUAI_API_KEY",),
        "cohere": ("CO_API_KEY",),
        "google": ("GEMINI_API_KEY",),
    }
)
"""Well-known key variables beyond ``api_key_env`` and ``<ID>_API_KEY`` (each also numbered)."""

_NO_CONVENTIONAL_KEY_ENV: frozenset[str] = frozenset({"cloudflare"})
"""Providers where ``<ID>_API_KEY`` means another credential: Cloudflare tooling reads
``CLOUDFLARE_API_KEY`` as the Global API Key (sent with an e-mail header), which Workers AI's bearer
auth rejects; its tokens are ``CLOUDFLARE_API_TOKEN``."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_URL_SAFE = re.compile(r"[A-Za-z0-9._~-]+")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BuiltinLimits(_Frozen):
    rpm: int | None = None
    rpd: int | None = None
    tpm: int | None = None
    tpd: int | None = None


class BuiltinModel(_Frozen):
    id: str
    display_name: str | None = None
    context_window: int | None = None
    limits: BuiltinLimits = Field(default_factory=BuiltinLimits)
    vision: bool = False
    tools: bool = True
    size: SizeTier | None = None
    enabled: bool = True

    def to_config(self) -> ModelConfig:
        return ModelConfig(
            id=self.id,
            display_name=self.display_name,
            context_window=self.context_window,
            tools=self.tools,
            vision=self.vision,
            enabled=self.enabled,
            limits=ModelLimits(**self.limits.model_dump()),
            tier=self.size.lower() if self.size is not None else None,  # type: ignore[arg-type]
        )


class BuiltinProvider(_Frozen):
    id: str
    name: str
    wire: Literal["openai", "gemini", "anthropic"]
    base_url: str
    auth: Literal["bearer", "x-goog-api-key", "none"]
    api_key_env: str | None = None
    api_key_env_prefixes: tuple[str, ...] = ()
    """Kept for reference only: prefix matching would pick up unrelated variables (``GITHUB_SHA``)."""
    timeout_s: float = 60.0
    models: tuple[BuiltinModel, ...] = ()

    @property
    def key_env_names(self) -> tuple[str, ...]:
        """Variables whose value is a key for this provider; ``NAME_<n>`` variants count too."""
        if self.auth == "none":
            return ()
        conventional = "" if self.id in _NO_CONVENTIONAL_KEY_ENV else f"{self.id.upper()}_API_KEY"
        names = [self.api_key_env or "", conventional, *_EXTRA_KEY_ENV.get(self.id, ())]
        return tuple(dict.fromkeys(n for n in names if n))

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_PLACEHOLDER.findall(self.base_url)))

    def placeholder_env(self, placeholder: str) -> str:
        return f"{self.id.upper()}_{placeholder.upper()}"

    def to_config(self, keys: Sequence[str] = (), *, base_url: str | None = None) -> ProviderConfig:
        return ProviderConfig(
            name=self.id,
            kind=self.wire,
            base_url=self.base_url if base_url is None else base_url,
            keys=list(keys),
            models=[m.to_config() for m in self.models],
            timeout_s=self.timeout_s,
        )


class _CatalogFile(_Frozen):
    source: str = ""
    providers: tuple[BuiltinProvider, ...]

    @model_validator(mode="after")
    def _unique_ids(self) -> _CatalogFile:
        ids = [p.id for p in self.providers]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate provider id in the built-in catalog")
        for p in self.providers:
            models = [m.id for m in p.models]
            if len(set(models)) != len(models):
                raise ValueError(f"duplicate model id under built-in provider {p.id!r}")
        return self


@cache
def builtin_catalog() -> tuple[BuiltinProvider, ...]:
    """Every provider of the embedded data file (immutable; read once)."""
    path = resources.files(_DATA_PACKAGE)
    for part in _DATA_FILE:
        path = path / part
    return _CatalogFile.model_validate_json(path.read_text(encoding="utf-8")).providers


@cache
def _size_index() -> Mapping[tuple[str, str], SizeTier]:
    return MappingProxyType(
        {(p.id, m.id): m.size for p in builtin_catalog() for m in p.models if m.size is not None}
    )


def _env_keys(env: Mapping[str, str], names: Iterable[str]) -> list[str]:
    """Values of ``NAME`` then ``NAME_<n>`` (ascending n) for each name; stripped, de-duplicated."""
    found: list[str] = []
    for name in names:
        found.append(env.get(name, ""))
        numbered = re.compile(re.escape(name) + r"_(\d+)")
        variants: list[tuple[int, str, str]] = []
        for var, value in env.items():
            m = numbered.fullmatch(var)
            if m is not None:
                variants.append((int(m.group(1)), var, value))
        found.extend(value for _, _, value in sorted(variants))
    return list(dict.fromkeys(k for k in (v.strip() for v in found) if k))


def _resolve_base_url(
    provider: BuiltinProvider, env: Mapping[str, str], keys: list[str]
) -> tuple[str, list[str]] | None:
    """Fill ``{placeholder}`` parts of the base URL; ``None`` when one stays unknown (provider skipped)."""
    placeholders = provider.placeholders
    if not placeholders:
        return provider.base_url, keys
    values = {ph: env.get(provider.placeholder_env(ph), "").strip() for ph in placeholders}
    if len(placeholders) == 1:
        (ph,) = placeholders
        split = [k.partition(":") for k in keys]
        if not values[ph]:
            values[ph] = next((prefix.strip() for prefix, sep, _ in split if sep), "")
        kept: list[str] = []
        for prefix, sep, token in split:
            if not sep:
                kept.append(prefix)
            elif prefix.strip() == values[ph]:
                kept.append(token.strip())
            else:
                log.warning(
                    "built-in provider %s: ignoring a key for another %s (configure a second provider in a "
                    "config file to use it)",
                    provider.id,
                    ph,
                )
        keys = list(dict.fromkeys(k for k in kept if k))
    missing = [provider.placeholder_env(ph) for ph, v in values.items() if not v]
    if missing:
        log.warning(
            "built-in provider %s has keys but %s is not set: skipped", provider.id, ", ".join(missing)
        )
        return None
    bad = [provider.placeholder_env(ph) for ph, v in values.items() if not _URL_SAFE.fullmatch(v)]
    if bad:
        log.warning("built-in provider %s: %s is not URL-safe: skipped", provider.id, ", ".join(bad))
        return None
    if not keys:
        return None
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], provider.base_url), keys


def builtin_providers(env: Mapping[str, str]) -> list[ProviderConfig]:
    """The built-in providers that ``env`` holds at least one key for, in catalog order."""
    out: list[ProviderConfig] = []
    for provider in builtin_catalog():
        if provider.wire not in SUPPORTED_WIRES or provider.auth == "none" or not provider.models:
            continue
        keys = _env_keys(env, provider.key_env_names)
        if not keys:
            continue
        resolved = _resolve_base_url(provider, env, keys)
        if resolved is None:
            continue
        base_url, keys = resolved
        out.append(provider.to_config(keys, base_url=base_url))
    return out


@dataclass(frozen=True, slots=True)
class _Candidate:
    label: str
    rpd: int | None
    provider_pos: int
    model_pos: int

    @property
    def rpd_key(self) -> tuple[bool, int]:
        """Sorts larger requests-per-day first, unknown (``None``) last."""
        return (self.rpd is None, -(self.rpd or 0))


def builtin_chain(providers: Sequence[ProviderConfig]) -> list[str]:
    """``provider/model`` labels for ``auto``: tool-capable enabled models, by tier, providers interleaved."""
    sizes = _size_index()
    unknown_tier = len(SIZE_TIERS)
    tiers: list[dict[str, list[_Candidate]]] = [{} for _ in range(unknown_tier + 1)]
    for provider_pos, provider in enumerate(providers):
        if not provider.enabled:
            continue
        for model_pos, model in enumerate(provider.models):
            if not (model.enabled and model.tools):
                continue
            size = sizes.get((provider.name, model.id))
            tier = SIZE_TIERS.index(size) if size is not None else unknown_tier
            tiers[tier].setdefault(provider.name, []).append(
                _Candidate(f"{provider.name}/{model.id}", model.limits.rpd, provider_pos, model_pos)
            )
    chain: list[str] = []
    last_provider: str | None = None
    for by_provider in tiers:
        if not by_provider:
            continue
        queues = {
            name: sorted(cands, key=lambda c: (c.rpd_key, c.model_pos)) for name, cands in by_provider.items()
        }
        order = sorted(queues, key=lambda name: (queues[name][0].rpd_key, queues[name][0].provider_pos))
        if len(order) > 1 and order[0] == last_provider:
            order[0], order[1] = order[1], order[0]
        for round_ in range(max(len(q) for q in queues.values())):
            for name in order:
                if round_ < len(queues[name]):
                    chain.append(queues[name][round_].label)
                    last_provider = name
    return chain


def builtin_settings(env: Mapping[str, str]) -> tuple[list[ProviderConfig], list[str]]:
    """Providers enabled by ``env`` and their ``auto`` chain."""
    providers = builtin_providers(env)
    return providers, builtin_chain(providers)
