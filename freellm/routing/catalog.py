"""The catalog: every (provider, model) route and every key, built once from the settings.

It answers one question for the router — which routes may serve the model a client asked for — with
the reference's rules: ``auto`` follows the chain; ``provider/model`` (or ``provider:model``) is a hard
pin; a bare model id names the group of every provider serving it, and failover stays inside that
group; anything else is a 404 ``model_not_found``.
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
                )
                self.routes.append(route)
                self.by_label[route.label.lower()] = route
                self.groups.setdefault(m.id.lower(), []).append(route)
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
        raise ClientError(
            404,
            f"The model `{name}` is not in the catalog. Use `auto`, a model id, or provider/model (see GET /v1/models).",
            code="model_not_found",
            param="model",
        )

    @staticmethod
    def _enabled_or_404(name: str, routes: list[ModelRoute]) -> list[ModelRoute]:
        enabled = [r for r in routes if r.enabled]
        if not enabled:
            raise ClientError(404, f"The model `{name}` is disabled.", code="model_not_found", param="model")
        return enabled
