"""``/admin/providers``: providers and their keys, listed masked, added and switched at run time.

Keys from the YAML/env stay where they are (never copied to disk); they can be disabled (recorded in
the overlay) but not deleted. Keys added here live in the encrypted vault (:mod:`freellm.secrets`).
Every answer shows a key only masked: at most its last four characters.

The work is done by public functions over a :class:`LiveConfig`, a :class:`KeyVault` and a
:class:`KeyHealth` rather than over the :class:`Gateway`, because ``freellm keys --config`` does the same
things to a data directory with no gateway running in-process (:mod:`freellm.cli_admin`): one set of
rules, messages and documents for both.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from pydantic import ValidationError

from freellm.admin.changes import admin_json, commit, json_reply, live_of, validated
from freellm.admin.live import LiveConfig, RuntimeKey
from freellm.config import ProviderConfig
from freellm.errors import ClientError
from freellm.net.ssrf import HostRefused, Reach, check_url
from freellm.providers.base import Provider
from freellm.routing.catalog import key_fingerprint
from freellm.routing.health import HEALTH_SETTING, KeyHealth
from freellm.secrets import KeyVault, StoredKey, mask, validate_key_text
from freellm.server.state import GATEWAY, Gateway

__all__ = [
    "KeyCheck",
    "all_providers",
    "check_key",
    "check_upstream_url",
    "forget_key",
    "known_key",
    "known_provider",
    "provider_doc",
    "register",
    "reload_runtime_keys",
    "store_key",
    "valid_key",
]

_PROBE_TIMEOUT_S = 15.0


def register(app: web.Application) -> None:
    r = app.router
    r.add_get("/admin/providers", list_providers)
    r.add_post("/admin/providers", add_provider)
    r.add_post("/admin/providers/{name}/keys", add_key)
    r.add_patch("/admin/providers/{name}/keys/{key_id}", patch_key)
    r.add_delete("/admin/providers/{name}/keys/{key_id}", delete_key)
    r.add_post("/admin/providers/{name}/keys/{key_id}/test", test_key)


# ---- listing --------------------------------------------------------------------------------------------


async def list_providers(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    live = live_of(gw)
    return json_reply(request, {"data": [provider_doc(live, gw.router.health, p) for p in all_providers(live)]})


def all_providers(live: LiveConfig) -> list[ProviderConfig]:
    """The YAML's providers, then those the admin API added (without keys: those are in the vault)."""
    added = [ProviderConfig.model_validate({**p, "keys": []}) for p in live.overlay.providers]
    return [*live.base.providers, *added]


def provider_doc(live: LiveConfig, health: KeyHealth, provider: ProviderConfig) -> dict[str, Any]:
    """One provider as ``GET /admin/providers`` (and ``freellm keys list``) shows it, keys masked."""
    return {
        "name": provider.name,
        "kind": provider.kind,
        "base_url": provider.base_url,
        "enabled": provider.enabled,
        "keys": [_key_doc(live, health, provider.name, k) for k in _keys_of(live, provider.name)],
        "models": [m.model_dump(exclude_none=True) for m in provider.models],
    }


def _keys_of(live: LiveConfig, provider: str) -> list[RuntimeKey]:
    """Every key of ``provider``: the configured ones (``source: config``), then the added ones."""
    disabled = set(live.overlay.disabled_keys.get(provider, ()))
    configured = [
        RuntimeKey(key_fingerprint(k), provider, k, key_fingerprint(k) not in disabled)
        for k in dict.fromkeys(live.configured_keys(provider))
    ]
    return [*configured, *(k for k in live.runtime_keys if k.provider == provider)]


def _key_doc(live: LiveConfig, health: KeyHealth, provider: str, key: RuntimeKey) -> dict[str, Any]:
    configured = key.secret in live.configured_keys(provider)
    status = health.status(provider, key.id) if key.enabled else "disabled"
    return {
        "id": key.id,
        "masked": mask(key.secret),
        "enabled": key.enabled,
        "status": status,
        "source": "config" if configured else "runtime",
    }


# ---- providers ------------------------------------------------------------------------------------------


async def add_provider(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    live = live_of(gw)
    body = await admin_json(request)
    keys = body.pop("keys", None) or []
    if not isinstance(keys, list):
        raise ClientError(400, "Invalid provider: keys: Input should be a list of keys", param="keys")
    base_url = body.get("base_url")
    if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).netloc:
        raise ClientError(400, "Invalid provider: base_url: an http(s) URL is required", param="base_url")
    try:
        provider = ProviderConfig.model_validate({**body, "keys": []})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"]) or "provider"
        raise ClientError(400, f"Invalid provider: {where}: {first['msg']}", param=where) from None
    if provider.name in {p.name for p in all_providers(live)}:
        raise ClientError(409, f"A provider named `{provider.name}` already exists.", code="provider_exists")
    await check_upstream_url(gw, provider.base_url)
    secrets = [valid_key(k) for k in keys]
    overlay = copy.deepcopy(live.overlay)
    overlay.providers.append(provider.model_dump(mode="json", exclude={"keys"}))
    validated(live, overlay)
    if secrets:
        vault = _vault(gw)
        for secret in secrets:
            await vault.add(provider.name, secret)
        reload_runtime_keys(live, vault)
    await commit(gw, overlay)
    return json_reply(request, provider_doc(live, gw.router.health, provider), status=201)


# ---- keys ------------------------------------------------------------------------------------------------


async def store_key(live: LiveConfig, vault: KeyVault, provider: str, value: object) -> StoredKey:
    """Add ``value`` to ``provider``'s keys in the vault (and to ``live``'s run-time keys).

    ClientError: 404 for an unknown provider, 400 for text that is not a key, 409 for a key the
    provider already has (from the YAML/env or the vault). The caller applies the new settings.
    """
    name = known_provider(live, provider)
    secret = valid_key(value)
    if any(k.id == key_fingerprint(secret) for k in _keys_of(live, name)):
        raise ClientError(409, "This key is already configured for the provider.", code="key_exists")
    stored = await vault.add(name, secret)
    reload_runtime_keys(live, vault)
    return stored


async def forget_key(live: LiveConfig, vault: KeyVault, provider: str, key_id: str) -> RuntimeKey:
    """Remove a key added at run time from the vault (and from ``live``); returns it.

    ClientError: 404 for an unknown provider or key, 409 for a key from the YAML/env (only the file
    can remove it; it can be disabled). The caller applies the new settings.
    """
    name = known_provider(live, provider)
    key = known_key(live, name, key_id)
    if key.secret in live.configured_keys(name):
        raise ClientError(
            409,
            "This key comes from the configuration file or environment; disable it instead "
            "(PATCH with {\"enabled\": false}) or remove it there.",
            code="key_from_config",
        )
    await vault.remove(name, key.id)
    reload_runtime_keys(live, vault)
    return key


async def add_key(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    live = live_of(gw)
    name = known_provider(live, request.match_info["name"])
    body = await admin_json(request)
    stored = await store_key(live, _vault(gw), name, body.get("key"))
    await commit(gw, live.overlay)
    return json_reply(request, {"id": stored.id, "masked": mask(stored.secret)}, status=201)


async def patch_key(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    live = live_of(gw)
    name = known_provider(live, request.match_info["name"])
    key = known_key(live, name, request.match_info["key_id"])
    body = await admin_json(request)
    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise ClientError(400, "Invalid request: enabled: Input should be a valid boolean", param="enabled")
    overlay = copy.deepcopy(live.overlay)
    if key.secret in live.configured_keys(name):
        ids = [i for i in overlay.disabled_keys.get(name, []) if i != key.id]
        if not enabled:
            ids.append(key.id)
        overlay.disabled_keys = {**overlay.disabled_keys, name: ids}
        if not ids:
            overlay.disabled_keys.pop(name)
    else:
        vault = _vault(gw)
        await vault.set_enabled(name, key.id, enabled)
        reload_runtime_keys(live, vault)
    if enabled:
        gw.router.health.enable(name, key.id)
    await commit(gw, overlay)
    return json_reply(request, _key_doc(live, gw.router.health, name, known_key(live, name, key.id)))


async def delete_key(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    live = live_of(gw)
    key = await forget_key(live, _vault(gw), request.match_info["name"], request.match_info["key_id"])
    await commit(gw, live.overlay)
    return json_reply(request, {"id": key.id, "deleted": True})


@dataclass(frozen=True, slots=True)
class KeyCheck:
    """The outcome of one key check: the upstream's HTTP status (None: no answer) and how long it took."""

    upstream_status: int | None
    latency_ms: int

    @property
    def ok(self) -> bool:
        return self.upstream_status is not None and 200 <= self.upstream_status < 300

    def doc(self, key_id: str, status: str) -> dict[str, Any]:
        """The answer of ``POST …/keys/{id}/test``; ``status`` is the key's health after the check."""
        error = None if self.ok else ("no answer" if self.upstream_status is None else f"HTTP {self.upstream_status}")
        return {
            "id": key_id,
            "ok": self.ok,
            "upstream_status": self.upstream_status,
            "latency_ms": self.latency_ms,
            "status": status,
            "error": error,
        }


async def check_key(provider: Provider, secret: str, timeout_s: float = _PROBE_TIMEOUT_S) -> KeyCheck:
    """One cheap authenticated upstream call with ``secret``: the wire's ``probe`` (``GET
    {base_url}/models``), timed. Shared by the admin API and ``freellm keys test --config``."""
    started = time.monotonic()
    status = await provider.probe(secret, timeout_s)
    return KeyCheck(status, int((time.monotonic() - started) * 1000))


async def test_key(request: web.Request) -> web.Response:
    """One cheap authenticated upstream call (``GET {base_url}/models``) with the key, and its outcome
    (also recorded as the key's health)."""
    gw = request.app[GATEWAY]
    live = live_of(gw)
    name = known_provider(live, request.match_info["name"])
    key = known_key(live, name, request.match_info["key_id"])
    try:
        provider = gw.router.provider(name)
    except KeyError:
        raise ClientError(409, f"The provider `{name}` is disabled.", code="provider_disabled") from None
    check = await check_key(provider, key.secret)
    health = gw.router.health
    if health.record_check(name, key.id, check.upstream_status, time.time()):
        await gw.store.set_setting(HEALTH_SETTING, health.dump())  # every process learns it (admin.watch)
    return json_reply(request, check.doc(key.id, health.status(name, key.id)))


# ---- helpers -------------------------------------------------------------------------------------------


def known_provider(live: LiveConfig, name: str) -> str:
    """``name``, or a 404 when no provider (configured or added) has it."""
    if name not in {p.name for p in all_providers(live)}:
        raise ClientError(404, f"There is no provider `{name}`.", code="provider_not_found")
    return name


def known_key(live: LiveConfig, provider: str, key_id: str) -> RuntimeKey:
    """``provider``'s key with id ``key_id`` (configured or added), or a 404."""
    for key in _keys_of(live, provider):
        if key.id == key_id:
            return key
    raise ClientError(404, f"The provider `{provider}` has no key `{key_id}`.", code="key_not_found")


async def check_upstream_url(gw: Gateway, url: str) -> None:
    """The SSRF guard for a base URL set through the admin API (``Reach.UPSTREAM``, docs/security.md):
    a 400 naming ``base_url`` when it reaches a link-local or cloud-metadata address, unless
    ``security.allow_private_upstreams``. Loopback and LAN addresses pass (local Ollama, vLLM)."""
    if gw.settings.security.allow_private_upstreams:
        return
    try:
        await check_url(url, Reach.UPSTREAM)
    except HostRefused as exc:
        raise ClientError(
            400,
            f"Invalid provider: base_url: {exc}; such upstreams need security.allow_private_upstreams: true",
            param="base_url",
            code="upstream_not_allowed",
        ) from None


def valid_key(value: object) -> str:
    """The key as it will be stored, or a 400 saying which rule it breaks (never the value)."""
    try:
        return validate_key_text(value)
    except ValueError as exc:
        raise ClientError(400, f"Invalid request: key: {exc}", param="key") from None


def _vault(gw: Gateway) -> KeyVault:
    if gw.vault is None:
        raise ClientError(503, "The key vault is not available.", type="service_unavailable")
    return gw.vault


def reload_runtime_keys(live: LiveConfig, vault: KeyVault) -> None:
    """``live``'s run-time keys from the vault's (after a change, or a reload from the store)."""
    live.runtime_keys = [RuntimeKey(k.id, k.provider, k.secret, k.enabled) for k in vault.keys(None)]
