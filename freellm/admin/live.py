"""Live configuration: what the admin API changed, persisted in the store and applied over the YAML.

The YAML (and the environment) is the *base*; the admin API records its changes in an *overlay* — the
providers it added, the chain it set, keys it disabled, the settings that are safe to change live
(strategy, cache, compression, fusion defaults) — kept as one store setting, ``admin_overlay``. On
every start the overlay is applied over the base again, so the admin API's changes win over the YAML
(docs/admin.md). Provider keys added at run time are never in the overlay: they are in the encrypted
key vault (:mod:`freellm.secrets`), merged in memory only.

:func:`apply_settings` swaps the effective settings into a running gateway without a restart: a new
catalog, providers and pipeline; what the router learned is kept; in-flight requests finish on what
they started with.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import orjson

from freellm.config import Settings
from freellm.store.base import StateStore, setting_object

if TYPE_CHECKING:
    import aiohttp

    from freellm.providers.base import Provider
    from freellm.server.state import Gateway

__all__ = [
    "LIVE_FIELDS",
    "OVERLAY_SETTING",
    "LiveConfig",
    "Overlay",
    "RuntimeKey",
    "apply_settings",
    "build_upstreams",
]

log = logging.getLogger("freellm.admin")

OVERLAY_SETTING = "admin_overlay"

LIVE_FIELDS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "routing": frozenset({"strategy", "exploration", "stats_ttl_s"}),
        "cache": frozenset({"enabled", "ttl_s", "max_entries", "max_temperature", "stream_max_bytes", "max_bytes"}),
        "compression": frozenset({"mode", "auto_trigger_tokens", "target_tokens", "prefix_freeze"}),
        "fusion": frozenset(
            {"enabled", "default_k", "max_k", "judge", "strategy", "panel", "panel_timeout_s", "max_cost_tokens"}
        ),
    }
)
"""The settings the admin API may change live, by section."""


@dataclass(frozen=True, slots=True)
class RuntimeKey:
    """A key added at run time (decrypted from the vault; never written anywhere in the clear)."""

    id: str
    provider: str
    secret: str
    enabled: bool

    def __repr__(self) -> str:
        return f"RuntimeKey(id={self.id!r}, provider={self.provider!r}, enabled={self.enabled})"


@dataclass(slots=True)
class Overlay:
    providers: list[dict[str, Any]] = field(default_factory=list)
    """Provider objects added at run time, shaped like the YAML ones, without keys."""
    chain: list[str] | None = None
    disabled_keys: dict[str, list[str]] = field(default_factory=dict)
    """Provider name → ids of configured (YAML/env) keys switched off at run time."""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def provider_names(self) -> frozenset[str]:
        """Names of the providers added at run time (their base URLs are not the file's: not trusted)."""
        return frozenset(str(p.get("name")) for p in self.providers)

    def is_empty(self) -> bool:
        return not (self.providers or self.chain is not None or self.disabled_keys or self.settings)

    def dump(self) -> str:
        doc = {
            "version": 1,
            "providers": self.providers,
            "chain": self.chain,
            "disabled_keys": self.disabled_keys,
            "settings": self.settings,
        }
        return orjson.dumps(doc).decode()

    @classmethod
    def load(cls, raw: str | None) -> Overlay:
        doc = setting_object(raw) or {}
        providers = [p for p in doc.get("providers") or [] if isinstance(p, dict)]
        chain = doc.get("chain")
        disabled = doc.get("disabled_keys") or {}
        settings = doc.get("settings") or {}
        return cls(
            providers=providers,
            chain=[c for c in chain if isinstance(c, str)] if isinstance(chain, list) else None,
            disabled_keys={
                str(k): [i for i in v if isinstance(i, str)] for k, v in disabled.items() if isinstance(v, list)
            }
            if isinstance(disabled, dict)
            else {},
            settings={
                s: {k: v for k, v in values.items() if k in LIVE_FIELDS[s]}
                for s, values in settings.items()
                if s in LIVE_FIELDS and isinstance(values, dict)
            }
            if isinstance(settings, dict)
            else {},
        )


class LiveConfig:
    """The base settings, the overlay and the run-time keys; :meth:`effective` merges them."""

    def __init__(self, base: Settings, store: StateStore) -> None:
        self.base = base
        self.store = store
        self.overlay = Overlay()
        self.runtime_keys: list[RuntimeKey] = []

    async def load(self) -> None:
        self.overlay = Overlay.load(await self.store.get_setting(OVERLAY_SETTING))

    async def save(self) -> None:
        await self.store.set_setting(OVERLAY_SETTING, self.overlay.dump())

    def effective(self, overlay: Overlay | None = None) -> Settings:
        """The settings the gateway runs with (``overlay``: a candidate, to validate a change before it
        is kept). Raises pydantic's ValidationError when the merge does not validate."""
        ov = overlay or self.overlay
        if ov.is_empty() and not self.runtime_keys:
            return self.base
        doc = self.base.model_dump(mode="python")
        doc["providers"] = [*doc["providers"], *(copy.deepcopy(p) | {"keys": []} for p in ov.providers)]
        for provider in doc["providers"]:
            disabled = set(ov.disabled_keys.get(provider["name"], ()))
            keys = [k for k in provider["keys"] if _key_id(k) not in disabled]
            keys += [k.secret for k in self.runtime_keys if k.provider == provider["name"] and k.enabled]
            provider["keys"] = keys
        if ov.chain is not None:
            doc["chain"] = list(ov.chain)
        for section, values in ov.settings.items():
            doc[section] = {**doc[section], **values}
        return Settings.model_validate(doc)

    def effective_or_base(self) -> Settings:
        """:meth:`effective`, or the base when the stored changes no longer validate against it (a
        provider they name was removed from the YAML…): logged, and the gateway runs on the file as is."""
        try:
            return self.effective()
        except ValueError as exc:
            log.error("the admin API's stored changes do not apply to this configuration (%s); using the file as is", exc)
            return self.base

    def configured_keys(self, provider: str) -> list[str]:
        """The YAML/env keys of ``provider`` (the base's; an added provider has none)."""
        for p in self.base.providers:
            if p.name == provider:
                return list(p.keys)
        return []


def _key_id(secret: str) -> str:
    from freellm.routing.catalog import key_fingerprint

    return key_fingerprint(secret)


def build_upstreams(
    settings: Settings,
    added: frozenset[str],
    session: aiohttp.ClientSession,
    runtime_session: aiohttp.ClientSession | None,
) -> dict[str, Provider]:
    """The providers of ``settings``, in their order: those from the configuration file on ``session``,
    those the admin API ``added`` on ``runtime_session`` — the pool whose resolver refuses link-local and
    cloud-metadata addresses at every connection (:class:`freellm.net.ssrf.GuardedResolver`; None when
    ``security.allow_private_upstreams`` is on: one pool for all)."""
    from freellm.providers.registry import build_providers

    out: dict[str, Provider] = {}
    for provider in settings.providers:
        pool = runtime_session if runtime_session is not None and provider.name in added else session
        out.update(build_providers([provider], pool))
    return out


async def apply_settings(gw: Gateway, settings: Settings) -> None:
    """Run the gateway on ``settings`` from the next request on (see the module doc)."""
    from freellm.engine.fallback import FallbackLoop
    from freellm.engine.pipeline.build import build_pipeline
    from freellm.engine.turn import Engine
    from freellm.routing.catalog import Catalog
    from freellm.routing.sessions import SessionMemory
    from freellm.server.state import build_compressor, compression_configured

    catalog = Catalog(settings)
    added = gw.live.overlay.provider_names() if gw.live is not None else frozenset()
    providers = build_upstreams(settings, added, gw.session, gw.runtime_session)
    router = gw.router
    router.reconfigure(settings, catalog, providers)
    gw.cache.config = settings.cache
    compressor = gw.compressor
    if settings.compression != gw.settings.compression:
        # As at start-up: built now when configured (a bad one fails the reload), else on first use.
        configured = compression_configured(settings.compression, gw.data_dir)
        compressor = build_compressor(settings.compression, gw.data_dir) if configured else None
    sessions = SessionMemory(settings.sessions, gw.store)
    pipeline = build_pipeline(settings, router, compressor=compressor, cache=gw.cache, sessions=sessions)
    gw.engine = Engine(settings, router, FallbackLoop(settings, router, gw.store), pipeline)
    gw.catalog = catalog
    gw.compressor = compressor
    gw.settings = settings
