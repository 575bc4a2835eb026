"""The catalog: every (provider, model) route and every key, built once from the settings.

It answers one question for the router — which routes may serve the model a client asked for — with
the reference's rules: ``auto`` follows the chain; ``provider/model`` (or ``provider:model``) is a hard
pin; a bare model id names the group of every provider serving it, and failover stays inside that
group; anything else is a 404 ``model_not_found``. Embedding models (``kind: embedding``) live apart,
by family (:meth:`Catalog.resolve_embedding`): a chat request never reaches one, nor an embeddings
request a chat model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from freellm.config import ModelLimits, ModelTier, Settings
from freellm.errors import ClientError
from freellm.routing.cooldowns import is_local_base_url
from freellm.routing.scoring import resolve_strategy, strategy_names

__all__ = ["AUTO", "Catalog", "KeyRef", "ModelRoute"]

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """One model at one provider."""

    provider: str
    model: str
    label: str
    context_window: int | None
    tools: bool
    vision: bool
    enabled: bool
    limits: ModelLimits
    is_local: bool
    tier: ModelTier | None = None
    rank: int | None = None
    family: str | None = None
    """The embedding family of an embedding route (None: a chat route)."""
    dimensions: int | None = None
    """An embedding route's native vector length, when declared."""


@dataclass(frozen=True, slots=True)
class KeyRef:
    """A provider key and its stable, non-secret fingerprint (what the store and logs see)."""

    secret: str
    key_id: str

    def __repr__(self) -> str:  # never print the secret
        return f"KeyRef(key_id={self.key_id!r})"


def key_fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


class Catalog:
    def __init__(self, settings: Settings) -> None:
        self.routes: list[ModelRoute] = []
        self.by_label: dict[str, ModelRoute] = {}
        self.groups: dict[str, list[ModelRoute]] = {}
        self.keys: dict[str, list[KeyRef]] = {}
        self.embedding_routes: list[ModelRoute] = []
        self.embedding_by_label: dict[str, ModelRoute] = {}
        self.families: dict[str, list[ModelRoute]] = {}
        """Embedding family (lower case) → its members in declaration order."""
        for provider in settings.providers:
            local = is_local_base_url(provider.base_url)
            self.keys[provider.name] = (
                [KeyRef(k, key_fingerprint(k)) for k in dict.fromkeys(provider.keys)] if provider.enabled else []
            )
            for m in provider.models:
                route = ModelRoute(
                    provider=provider.name,
                    model=m.id,
                    label=f"{provider.name}/{m.id}",
                    context_window=m.context_window,
                    tools=m.tools,
                    vision=m.vision,
                    enabled=m.enabled and provider.enabled,
                    limits=m.limits,
                    is_local=local,
                    tier=m.tier,
                    rank=m.rank,
                    family=m.embedding_family if m.kind == "embedding" else None,
                    dimensions=m.dimensions,
                )
                if route.family is not None:  # never a chat route: its own catalog below
                    self.embedding_routes.append(route)
                    self.embedding_by_label[route.label.lower()] = route
                    self.families.setdefault(route.family.lower(), []).append(route)
                    continue
                self.routes.append(route)
                self.by_label[route.label.lower()] = route
                self.groups.setdefault(m.id.lower(), []).append(route)
        self.default_family = (settings.embeddings.default_family or next(iter(self.families), "")).strip().lower()
        """The family ``auto`` names on the embeddings routes."""
        self.chain: list[ModelRoute] = self._resolve_chain(settings.chain)
        self.profiles = settings.profiles
        self.profile_chains: dict[str, list[ModelRoute]] = {
            name: self._resolve_chain(p.chain) if p.chain else self.chain for name, p in settings.profiles.items()
        }
        """Profile name → the routes its ``auto`` (``auto:NAME``) tries."""

    def _resolve_chain(self, chain: list[str]) -> list[ModelRoute]:
        """The routes ``auto`` tries, in order: enabled ones only (a disabled model is never routed)."""
        if not chain:
            return [r for r in self.routes if r.enabled]
        out: list[ModelRoute] = []
        for entry in chain:
            route = self._pinned(entry)
            if route is not None:
                out.append(route)
            else:
                out.extend(self.groups.get(entry.lower(), []))
        return [r for r in {r.label: r for r in out}.values() if r.enabled]

    def is_pin(self, requested: str) -> bool:
        """``provider/model`` (or ``provider:model``): a hard pin, never reordered by a session."""
        return self._pinned(requested.strip()) is not None

    def _pinned(self, name: str) -> ModelRoute | None:
        key = name.lower()
        route = self.by_label.get(key)
        if route is None and ":" in key:
            provider, _, model = key.partition(":")
            route = self.by_label.get(f"{provider}/{model}")
        return route

    def member(self, name: str) -> ModelRoute | str:
        """One named route for a fusion panel or judge: a ``provider/model`` (or ``provider:model``) pin,
        or a model id's first enabled route. Else why not: ``"unknown"`` or ``"disabled"``."""
        route = self._pinned(name.strip())
        if route is not None:
            return route if route.enabled else "disabled"
        group = self.groups.get(name.strip().lower())
        if not group:
            return "unknown"
        return next((r for r in group if r.enabled), "disabled")

    def resolve(self, requested: str, profile: str | None = None) -> tuple[str, list[ModelRoute]]:
        """Map a requested model name to its candidate routes: (strategy key, routes in order).

        ``auto`` follows ``profile``'s chain when one applies; ``auto:NAME`` names profile NAME's chain
        (an unknown NAME is a 404)."""
        name = requested.strip()
        if not name or name.lower() in (AUTO, "auto:"):
            if profile is not None:
                return f"{AUTO}:{profile}", self.profile_chains[profile]
            return AUTO, self.chain
        if name.lower().startswith("auto:"):
            wanted = name[5:]
            if wanted in self.profile_chains:
                return f"{AUTO}:{wanted}", self.profile_chains[wanted]
            strategy = resolve_strategy(wanted)
            if strategy is not None:
                chain = self.profile_chains[profile] if profile is not None else self.chain
                return f"{AUTO}:{strategy}", chain
            profiles = ", ".join(sorted(self.profile_chains)) or "none configured"
            raise ClientError(
                404,
                f"There is no strategy or profile `{wanted}` (model `{name}`). Strategies: "
                f"{', '.join(strategy_names())}; profiles: {profiles}.",
                code="model_not_found",
                param="model",
            )
        pinned = self._pinned(name)
        if pinned is not None:
            return pinned.label, self._enabled_or_404(name, [pinned])
        group = self.groups.get(name.lower())
        if group:
            return name.lower(), self._enabled_or_404(name, group)
        if name.lower() in self.families or name.lower() in self.embedding_by_label:
            raise ClientError(
                404,
                f"The model `{name}` is an embedding model: use POST /v1/embeddings.",
                code="model_not_found",
                param="model",
            )
        raise ClientError(
            404,
            f"The model `{name}` is not in the catalog. Use `auto`, a model id, or provider/model (see GET /v1/models).",
            code="model_not_found",
            param="model",
        )

    def resolve_embedding(self, requested: str) -> tuple[str, list[ModelRoute], bool]:
        """An embeddings request's model → (family, its routes in declaration order, pinned).

        Empty or ``auto``: ``embeddings.default_family`` (default: the first declared). A family name: its members. ``provider/model``
        (or ``provider:model``): that route alone, pinned. A member's bare model id: its family (so a
        client that names the upstream model still fails over inside the family). Else 404."""
        name = requested.strip()
        if not self.families:
            raise ClientError(
                404,
                "No embedding models are configured (declare one with `kind: embedding` under a provider's models).",
                code="model_not_found",
                param="model",
            )
        key = name.lower()
        if not key or key == AUTO:
            default = self.families[self.default_family]
            return default[0].family or self.default_family, self._enabled_or_404(name or AUTO, default), False
        route = self.embedding_by_label.get(key)
        if route is None and ":" in key:
            provider, _, model = key.partition(":")
            route = self.embedding_by_label.get(f"{provider}/{model}")
        if route is not None:
            return route.family or route.model, self._enabled_or_404(name, [route]), True
        members: list[ModelRoute] | None = self.families.get(key)
        if members is None:
            member = next((r for r in self.embedding_routes if r.model.lower() == key), None)
            members = self.families.get((member.family or "").lower()) if member is not None else None
        if members:
            return members[0].family or name, self._enabled_or_404(name, members), False
        known = ", ".join(r[0].family or "" for r in self.families.values())
        hint = " It is a chat model: use /v1/chat/completions." if key in self.groups or key in self.by_label else ""
        raise ClientError(
            404,
            f"The embedding model `{name}` is not in the catalog (families: {known}).{hint}",
            code="model_not_found",
            param="model",
        )

    @staticmethod
    def _enabled_or_404(name: str, routes: list[ModelRoute]) -> list[ModelRoute]:
        enabled = [r for r in routes if r.enabled]
        if not enabled:
            raise ClientError(404, f"The model `{name}` is disabled.", code="model_not_found", param="model")
        return enabled
