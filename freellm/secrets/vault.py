"""The key vault: provider keys added at run time, stored encrypted through the :class:`StateStore`.

Keys from the YAML config or the environment never come here — they are already somewhere the operator
controls, and copying them into the database would only add a place they can leak from. The vault holds
the keys an operator adds while the gateway runs (the admin API, ``freellm keys``).

**At rest.** One store setting, ``provider_keys``, holds JSON::

    {"version": 1, "keys": [{"id": "<key_id>", "provider": "<name>", "nonce": "<b64>", "ct": "<b64>",
                             "enabled": true, "added_at": <epoch seconds>}, ...]}

``ct`` is AES-256-GCM of the key's UTF-8 text under the master key with a fresh 12-byte ``nonce`` per
encryption and ``provider + "\\x1f" + id`` as associated data, so a record copied to another provider (or
given another id) fails to decrypt instead of handing one provider's key to another. The plaintext is
never in the setting; ``id`` is :func:`key_id`, the same non-secret fingerprint the catalog, the store's
key scopes, logs and the admin API use.

**Rotation** never leaves a moment where nothing on disk opens the stored keys. While a rotation runs,
each record also carries ``"prev": {"nonce", "ct"}`` — the same key under the old master — so both masters
open the setting while the master key itself is replaced:

1. the setting is written with ``ct`` under the new master and ``prev`` under the old one;
2. the caller saves the new master (:func:`~freellm.secrets.master.write_master_key`, or prints it);
3. the setting is written again without ``prev``.

A crash after 1 leaves the old master in place, which opens ``prev``; a crash after 2 leaves the new one,
which opens ``ct``. :meth:`KeyVault.load` finishes either case: when it finds ``prev`` it rewrites the
setting with whichever ciphertext the master it was given opened (the rotation is then rolled back or
completed, to match the master key on disk). The reverse order — the setting under the new master first,
then the master file — loses every key if the process dies in between.

The ``cryptography`` package is imported on first use, so a gateway that never stores a key never loads it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import secrets
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from freellm.routing.catalog import key_fingerprint
from freellm.secrets.master import MASTER_KEY_BYTES, MASTER_KEY_ENV, MasterKeyError
from freellm.store.base import StateStore

__all__ = [
    "MAX_KEY_CHARS",
    "SETTING_NAME",
    "VAULT_FORMAT_VERSION",
    "KeyVault",
    "StoredKey",
    "VaultError",
    "key_id",
    "mask",
    "validate_key_text",
]

SETTING_NAME: Final = "provider_keys"
VAULT_FORMAT_VERSION: Final = 1
MAX_KEY_CHARS: Final = 4096
"""Longer than any real API key (the longest, JWT-style tokens, are ~2 KB); bounds what is stored."""
NONCE_BYTES: Final = 12
"""The GCM nonce size the construction is designed for; random, so never reused under one key in practice
(the birthday bound at 2^96 is far beyond the handful of keys a gateway stores)."""


class VaultError(ValueError):
    """The ``provider_keys`` setting is damaged or from a newer freellm. Never silently forgotten: the
    next write would replace every stored key with nothing."""


# -- the non-secret face of a key ---------------------------------------------------------------------------
def mask(secret: str) -> str:
    """How a key is shown (admin API, CLI, logs): at most its last 4 characters, fewer for short keys so
    the mask never reveals a large share of the secret."""
    if len(secret) >= 12:
        return "…" + secret[-4:]
    if len(secret) >= 6:
        return "…" + secret[-2:]
    return "…"


def key_id(secret: str) -> str:
    """The key's stable non-secret id — the catalog's fingerprint, so the store, logs, cooldown scopes and
    the admin API all name a key the same way whether it came from the config or from the vault."""
    return key_fingerprint(secret)


def _is_control(char: str) -> bool:
    """C0 (U+0000 to U+001F), DEL (U+007F) and C1 (U+0080 to U+009F)."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def validate_key_text(value: object) -> str:
    """The key as it will be stored: ``value`` stripped of surrounding whitespace (a pasted trailing
    newline is harmless), or ValueError saying why it cannot be a key. The message never contains the
    value — it may be a real key pasted in the wrong place."""
    if not isinstance(value, str):
        raise ValueError(f"a provider key must be a string, not {type(value).__name__}")
    key = value.strip()
    if not key:
        raise ValueError("the provider key is empty" if not value else "the provider key is only whitespace")
    if len(key) > MAX_KEY_CHARS:
        raise ValueError(f"the provider key is {len(key)} characters long, over the limit of {MAX_KEY_CHARS}")
    for index, char in enumerate(key):
        if _is_control(char):
            raise ValueError(f"the provider key contains a control character (U+{ord(char):04X}) at position {index}")
        if char.isspace():
            raise ValueError(
                f"the provider key contains whitespace ({unicodedata.name(char, f'U+{ord(char):04X}')}) "
                f"at position {index}; a key is one word"
            )
    return key


def _check_provider(provider: object) -> str:
    """A provider name usable in the associated data: non-empty, no control characters (so the
    ``\\x1f`` separator is unambiguous)."""
    if not isinstance(provider, str) or not provider:
        raise ValueError("the provider name must be a non-empty string")
    if any(_is_control(c) for c in provider):
        raise ValueError("the provider name contains a control character")
    return provider


def _check_master(master: object, what: str = "the master key") -> bytes:
    if not isinstance(master, bytes) or len(master) != MASTER_KEY_BYTES:
        raise MasterKeyError(f"{what} must be exactly {MASTER_KEY_BYTES} bytes")
    return master


@dataclass(frozen=True, slots=True, repr=False)
class StoredKey:
    """One provider key the vault holds, decrypted (in memory only)."""

    id: str
    """:func:`key_id` of ``secret``."""
    provider: str
    secret: str
    enabled: bool
    added_at: float
    """Epoch seconds."""

    def __repr__(self) -> str:
        # Reprs end up in logs and tracebacks: the masked form only.
        return (
            f"StoredKey(id={self.id!r}, provider={self.provider!r}, secret={mask(self.secret)!r}, "
            f"enabled={self.enabled!r}, added_at={self.added_at!r})"
        )


# -- encryption (cryptography imported lazily) -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Sealed:
    nonce: bytes
    ct: bytes


@dataclass(frozen=True, slots=True)
class _Entry:
    key: StoredKey
    sealed: _Sealed
    """The key under the vault's current master."""
    prev: _Sealed | None = None
    """The key under the previous master, only while a rotation is being made durable."""


def _aad(provider: str, kid: str) -> bytes:
    return f"{provider}\x1f{kid}".encode()


def _seal(master: bytes, key: StoredKey) -> _Sealed:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(NONCE_BYTES)
    return _Sealed(nonce, AESGCM(master).encrypt(nonce, key.secret.encode(), _aad(key.provider, key.id)))


def _open(master: bytes, sealed: _Sealed, provider: str, kid: str) -> bytes | None:
    """The plaintext, or None when ``master`` (or the associated data) does not match."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        return AESGCM(master).decrypt(sealed.nonce, sealed.ct, _aad(provider, kid))
    except InvalidTag:
        return None


# -- the setting's JSON --------------------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _sealed_json(sealed: _Sealed) -> dict[str, str]:
    return {"nonce": _b64(sealed.nonce), "ct": _b64(sealed.ct)}


def _encode(entries: Sequence[_Entry]) -> str:
    records: list[dict[str, Any]] = []
    for entry in entries:
        key = entry.key
        record: dict[str, Any] = {"id": key.id, "provider": key.provider, **_sealed_json(entry.sealed)}
        record["enabled"] = key.enabled
        record["added_at"] = key.added_at
        if entry.prev is not None:
            record["prev"] = _sealed_json(entry.prev)
        records.append(record)
    return orjson.dumps({"version": VAULT_FORMAT_VERSION, "keys": records}).decode()


def _damaged(detail: str) -> VaultError:
    return VaultError(
        f"the stored provider keys (setting {SETTING_NAME!r}) are damaged: {detail}; restore the database "
        "from a backup (nothing was changed)"
    )


def _parse_sealed(obj: object, where: str) -> _Sealed:
    if not isinstance(obj, dict):
        raise _damaged(f"{where} is not an object")
    try:
        nonce = base64.b64decode(obj.get("nonce", ""), validate=True)
        ct = base64.b64decode(obj.get("ct", ""), validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise _damaged(f"{where} has a nonce or ciphertext that is not base64") from None
    if len(nonce) != NONCE_BYTES or len(ct) <= 16:
        raise _damaged(f"{where} has a nonce or ciphertext of the wrong size")
    return _Sealed(nonce, ct)


@dataclass(frozen=True, slots=True)
class _Decoded:
    entries: list[_Entry]
    had_prev: bool
    """A rotation was interrupted: the setting must be rewritten in the single form."""


def _decode(raw: str | None, master: bytes) -> _Decoded:
    """Every stored key, decrypted with ``master`` (``ct`` first, then ``prev``)."""
    if not raw:
        return _Decoded([], False)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _damaged("not JSON") from None
    if not isinstance(doc, dict):
        raise _damaged("not a JSON object")
    version = doc.get("version")
    if version != VAULT_FORMAT_VERSION:
        raise VaultError(
            f"the stored provider keys (setting {SETTING_NAME!r}) use format version {version!r}; this "
            f"freellm reads version {VAULT_FORMAT_VERSION} (run the freellm that wrote them)"
        )
    records = doc.get("keys")
    if not isinstance(records, list):
        raise _damaged("'keys' is not a list")
    entries: list[_Entry] = []
    had_prev = False
    for index, record in enumerate(records):
        where = f"record {index}"
        if not isinstance(record, dict):
            raise _damaged(f"{where} is not an object")
        kid, provider = record.get("id"), record.get("provider")
        enabled, added_at = record.get("enabled"), record.get("added_at")
        if not isinstance(kid, str) or not kid or not isinstance(provider, str) or not provider:
            raise _damaged(f"{where} has no id or provider")
        where = f"key {kid}"
        if not isinstance(enabled, bool) or isinstance(added_at, bool) or not isinstance(added_at, int | float):
            raise _damaged(f"{where} has a bad 'enabled' or 'added_at'")
        sealed = _parse_sealed(record, where)
        prev = _parse_sealed(record["prev"], f"{where} (previous master)") if "prev" in record else None
        had_prev = had_prev or prev is not None
        plain = _open(master, sealed, provider, kid)
        opened = sealed
        if plain is None and prev is not None:
            plain = _open(master, prev, provider, kid)
            opened = prev
        if plain is None:
            raise MasterKeyError(
                f"stored provider keys cannot be decrypted with this master key (key {kid} fails): the "
                f"master key is not the one they were stored with; restore that {MASTER_KEY_ENV} or "
                "master.key (or remove the keys stored at run time and add them again)"
            )
        try:
            secret = plain.decode()
        except UnicodeDecodeError:
            raise _damaged(f"{where} decrypts to bytes that are not UTF-8") from None
        if key_id(secret) != kid:
            raise _damaged(f"{where} decrypts to a key with another id")
        stored = StoredKey(id=kid, provider=provider, secret=secret, enabled=enabled, added_at=float(added_at))
        entries.append(_Entry(stored, opened))
    return _Decoded(entries, had_prev)


# -- the vault -------------------------------------------------------------------------------------------------
class KeyVault:
    """Provider keys added at run time, encrypted under ``master`` in the ``provider_keys`` setting.

    The decrypted keys live in memory (:meth:`keys`) after :meth:`load`; each change encrypts only what
    it adds, writes the whole setting once, and is persisted (``store.flush()``) before the method
    returns. Changes are serialized by one lock, so two concurrent ``add`` calls cannot drop each other.
    The store must be open. One vault per store; other processes sharing the store's database (a
    ``freellm keys`` command, another worker) are seen through ``refresh_settings``: a change starts
    from their newest write, so it does not drop their keys (only two writes in the same few
    milliseconds can still race, until a shared store makes the update atomic).
    """

    def __init__(self, store: StateStore, master: bytes, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._master = _check_master(master)
        self._clock = clock
        self._entries: list[_Entry] | None = None
        """None until the first load; replaced (never mutated) by each change."""
        self._lock = asyncio.Lock()
        self._broken: str | None = None
        """Why the vault refuses to write: a rotation failed part way, so which master is on disk is
        unknown here; only a vault built from the master key on disk may write again."""

    # -- reading ----------------------------------------------------------------------------------------------
    async def load(self) -> list[StoredKey]:
        """Read and decrypt every stored key (and finish a rotation a crash interrupted, see the module).

        Raises :class:`MasterKeyError` when a key does not decrypt with this master and
        :class:`VaultError` when the setting is damaged.
        """
        async with self._lock:
            self._check_writable()
            await self._store.refresh_settings((SETTING_NAME,))  # another process's newest write
            entries = await self._load_locked()
        return [e.key for e in entries]

    def keys(self, provider: str | None = None) -> list[StoredKey]:
        """The keys as of the last load or change (no I/O), in the order they were added."""
        entries = self._entries
        if entries is None:
            raise RuntimeError("KeyVault.keys() before load()")
        return [e.key for e in entries if provider is None or e.key.provider == provider]

    # -- changing -------------------------------------------------------------------------------------------
    async def add(self, provider: str, secret: str) -> StoredKey:
        """Store a new key (validated by :func:`validate_key_text`, then encrypted), enabled.

        ValueError for an invalid provider name or key, or a key the provider already has.
        """
        provider = _check_provider(provider)
        text = validate_key_text(secret)
        kid = key_id(text)
        async with self._lock:
            self._check_writable()
            entries = await self._current()
            if any(e.key.provider == provider and e.key.id == kid for e in entries):
                raise ValueError(f"key {kid} is already added to provider {provider!r}")
            stored = StoredKey(id=kid, provider=provider, secret=text, enabled=True, added_at=self._clock())
            await self._persist([*entries, _Entry(stored, _seal(self._master, stored))])
        return stored

    async def remove(self, provider: str, key_id: str) -> bool:
        """Forget a stored key; False when the provider has no such key."""
        async with self._lock:
            self._check_writable()
            entries = await self._current()
            kept = [e for e in entries if not (e.key.provider == provider and e.key.id == key_id)]
            if len(kept) == len(entries):
                return False
            await self._persist(kept)
        return True

    async def set_enabled(self, provider: str, key_id: str, enabled: bool) -> bool:
        """Turn a stored key on or off (kept either way); False when the provider has no such key."""
        async with self._lock:
            self._check_writable()
            entries = await self._current()
            for index, entry in enumerate(entries):
                if entry.key.provider == provider and entry.key.id == key_id:
                    if entry.key.enabled != enabled:
                        changed = replace(entry, key=replace(entry.key, enabled=bool(enabled)))
                        await self._persist([*entries[:index], changed, *entries[index + 1 :]])
                    return True
        return False

    async def rotate(self, new_master: bytes, save_master: Callable[[bytes], object]) -> int:
        """Re-encrypt every stored key under ``new_master``; returns how many.

        ``save_master(new_master)`` must make the new master key durable (write the key file, or show
        the operator the value to set) and is called at the one point where that is safe: after the
        setting opens with both masters, before the old ciphertexts are dropped (see the module for why
        this order loses nothing whenever the process dies). If anything fails part way the error is
        raised and this vault refuses further changes: build a new one from the master key on disk,
        whose :meth:`load` completes or rolls back the rotation to match it.
        """
        new_master = _check_master(new_master, "the new master key")
        if new_master == self._master:
            raise ValueError("the new master key is the current one")
        async with self._lock:
            self._check_writable()
            entries = await self._current()
            try:
                both = [_Entry(e.key, _seal(new_master, e.key), prev=e.sealed) for e in entries]
                await self._persist(both)
                save_master(new_master)
                self._master = new_master
                await self._persist([replace(e, prev=None) for e in both])
            except BaseException as exc:
                self._broken = f"a master key rotation failed part way ({type(exc).__name__})"
                raise
        return len(entries)

    # -- internals ------------------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self._broken is not None:
            raise MasterKeyError(
                f"{self._broken}: the stored keys open with the old or the new master key; restart (load the "
                "master key again) before changing stored keys"
            )

    async def _current(self) -> list[_Entry]:
        """The entries a change starts from: re-read first when another process sharing the store (a
        ``freellm keys`` command, another worker) wrote the setting since, so its keys are not dropped."""
        if await self._store.refresh_settings((SETTING_NAME,)):
            return await self._load_locked()
        return await self._loaded()

    async def _loaded(self) -> list[_Entry]:
        """The entries, loading them first if nothing has yet (a write must never start from nothing)."""
        if self._entries is not None:
            return self._entries
        return await self._load_locked()

    async def _load_locked(self) -> list[_Entry]:
        decoded = _decode(await self._store.get_setting(SETTING_NAME), self._master)
        if decoded.had_prev:
            # An interrupted rotation: keep the ciphertexts this (on-disk) master opens, drop the others.
            await self._persist(decoded.entries)
        else:
            self._entries = decoded.entries
        return decoded.entries

    async def _persist(self, entries: list[_Entry]) -> None:
        """Write ``entries`` as the setting and make it durable.

        The in-memory entries change once the store has taken the value (its memory is authoritative:
        a failed flush keeps the batch and retries it), so the vault never disagrees with the store.
        """
        await self._store.set_setting(SETTING_NAME, _encode(entries))
        self._entries = entries
        await self._store.flush()
