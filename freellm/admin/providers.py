"""``/admin/providers``: providers and their keys, listed masked, added and switched at run time.

Keys from the YAML/env stay where they are (never copied to disk); they can be disabled (recorded in
the overlay) but not deleted. Keys added here live in the encrypted vault (:mod:`freellm.secrets`).
Every answer shows a key only masked: at most its last four characters.
"""

from __future__ import annotations

import copy
import time
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from pydantic import ValidationError

from freellm.admin.changes import admin_json, commit, json_reply, live_of, validated
from freellm.admin.live import RuntimeKey
from freellm.config import ProviderConfig
from freellm.errors import ClientError
from freellm.routing.catalog import key_fingerprint
from freellm.secrets import KeyVault, mask, validate_key_text
from freellm.server.state import GATEWAY, Gateway

__all__ = ["register"]

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
    return json_reply(request, {"data": [_provider_doc(gw, p) for p in _all_providers(gw)]})


def _all_providers(gw: Gateway) -> list[ProviderConfig]:
    live = live_of(gw)
    added = [ProviderConfig.model_validate({**p, "keys": []}) for p in live.overlay.providers]
    return [*live.base.providers, *added]


def _provider_doc(gw: Gateway, provider: ProviderConfig) -> dict[str, Any]:
    return {
        "name": provider.name,
        "kind": provider.kind,
        "base_url": provider.base_url,
        "enabled": provider.enabled,
        "keys": [_key_doc(gw, provider.name, k) for k in _keys_of(gw, provider.name)],
        "models": [m.model_dump(exclude_none=True) for m in provider.models],
    }


def _keys_of(gw: Gateway, provider: str) -> list[RuntimeKey]:
    """Every key of ``provider``: the configured ones (``source: config``), then the added ones."""
    live = live_of(gw)
    disabled = set(live.overlay.disabled_keys.get(provider, ()))
    configured = [
        RuntimeKey(key_fingerprint(k), provider, k, key_fingerprint(k) not in disabled)
        for k in dict.fromkeys(live.configured_keys(provider))
    ]
    return [*configured, *(k for k in live.runtime_keys if k.provider == provider)]


def _key_doc(gw: Gateway, provider: str, key: RuntimeKey) -> dict[str, Any]:
    configured = key.secret in live_of(gw).configured_keys(provider)
    status = gw.router.health.status(provider, key.id) if key.enabled else "disabled"
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
    if provider.name in {p.name for p in _all_providers(gw)}:
        raise ClientError(409, f"A provider named `{provider.name}` already exists.", code="provider_exists")
    secrets = [_valid_key(k) for k in keys]
    overlay = copy.deepcopy(live.overlay)
    overlay.providers.append(provider.model_dump(mode="json", exclude={"keys"}))
    validated(live, overlay)
    if secrets:
        for secret in secrets:
            await _vault(gw).add(provider.name, secret)
        await _reload_runtime_keys(gw)
    await commit(gw, overlay)
    return json_reply(request, _provider_doc(gw, provider), status=201)


# ---- keys ------------------------------------------------------------------------------------------------


async def add_key(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    name = _known_provider(gw, request.match_info["name"])
    body = await admin_json(request)
    secret = _valid_key(body.get("key"))
    if any(k.id == key_fingerprint(secret) for k in _keys_of(gw, name)):
        raise ClientError(409, "This key is already configured for the provider.", code="key_exists")
    stored = await _vault(gw).add(name, secret)
    await _reload_runtime_keys(gw)
    await commit(gw, live_of(gw).overlay)
    return json_reply(request, {"id": stored.id, "masked": mask(secret)}, status=201)


async def patch_key(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    name = _known_provider(gw, request.match_info["name"])
    key = _known_key(gw, name, request.match_info["key_id"])
    body = await admin_json(request)
    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise ClientError(400, "Invalid request: enabled: Input should be a valid boolean", param="enabled")
    live = live_of(gw)
    overlay = copy.deepcopy(live.overlay)
    if key.secret in live.configured_keys(name):
        ids = [i for i in overlay.disabled_keys.get(name, []) if i != key.id]
        if not enabled:
            ids.append(key.id)
        overlay.disabled_keys = {**overlay.disabled_keys, name: ids}
        if not ids:
            overlay.disabled_keys.pop(name)
    else:
        await _vault(gw).set_enabled(name, key.id, enabled)
        await _reload_runtime_keys(gw)
    if enabled:
        gw.router.health.enable(name, key.id)
    await commit(gw, overlay)
    return json_reply(request, _key_doc(gw, name, _known_key(gw, name, key.id)))


async def delete_key(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    name = _known_provider(gw, request.match_info["name"])
    key = _known_key(gw, name, request.match_info["key_id"])
    if key.secret in live_of(gw).configured_keys(name):
        raise ClientError(
            409,
            "This key comes from the configuration file or environment; disable it instead "
            "(PATCH with {\"enabled\": false}) or remove it there.",
            code="key_from_config",
        )
    await _vault(gw).remove(name, key.id)
    await _reload_runtime_keys(gw)
    await commit(gw, live_of(gw).overlay)
    return json_reply(request, {"id": key.id, "deleted": True})


async def test_key(request: web.Request) -> web.Response:
    """One cheap authenticated upstream call (``GET {base_url}/models``) with the key, and its outcome
    (also recorded as the key's health)."""
    gw = request.app[GATEWAY]
    name = _known_provider(gw, request.match_info["name"])
    key = _known_key(gw, name, request.match_info["key_id"])
    try:
        provider = gw.router.provider(name)
    except KeyError:
        raise ClientError(409, f"The provider `{name}` is disabled.", code="provider_disabled") from None
    started = time.monotonic()
    status = await provider.probe(key.secret, _PROBE_TIMEOUT_S)
    took_ms = int((time.monotonic() - started) * 1000)
    gw.router.health.record_check(name, key.id, status, time.time())
    ok = status is not None and 200 <= status < 300
    return json_reply(
        request,
        {
            "id": key.id,
            "ok": ok,
            "upstream_status": status,
            "latency_ms": took_ms,
            "status": gw.router.health.status(name, key.id),
            "error": None if ok else ("no answer" if status is None else f"HTTP {status}"),
        },
    )


# ---- helpers -------------------------------------------------------------------------------------------


def _known_provider(gw: Gateway, name: str) -> str:
    if name not in {p.name for p in _all_providers(gw)}:
        raise ClientError(404, f"There is no provider `{name}`.", code="provider_not_found")
    return name


def _known_key(gw: Gateway, provider: str, key_id: str) -> RuntimeKey:
    for key in _keys_of(gw, provider):
        if key.id == key_id:
            return key
    raise ClientError(404, f"The provider `{provider}` has no key `{key_id}`.", code="key_not_found")


def _valid_key(value: object) -> str:
    try:
        return validate_key_text(value)
    except ValueError as exc:
        raise ClientError(400, f"Invalid request: key: {exc}", param="key") from None


def _vault(gw: Gateway) -> KeyVault:
    if gw.vault is None:
        raise ClientError(503, "The key vault is not available.", type="service_unavailable")
    return gw.vault


async def _reload_runtime_keys(gw: Gateway) -> None:
    live = live_of(gw)
    live.runtime_keys = [RuntimeKey(k.id, k.provider, k.secret, k.enabled) for k in _vault(gw).keys(None)]
