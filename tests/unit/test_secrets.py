"""The master key and the encrypted key vault (freellm.secrets), over real stores.

Stores are the real ``MemoryStore`` and a real ``SQLiteStore`` in ``tmp_path``; the SQLite tests also read
the database files' bytes to check that no plaintext key reaches the disk.
"""

from __future__ import annotations

import asyncio
import base64
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from freellm.routing.catalog import key_fingerprint
from freellm.secrets import (
    MASTER_KEY_ENV,
    MAX_KEY_CHARS,
    SETTING_NAME,
    KeyVault,
    MasterKeyError,
    StoredKey,
    VaultError,
    key_id,
    load_master_key,
    mask,
    parse_master_key,
    validate_key_text,
    write_master_key,
)
from freellm.secrets.master import _create_key_file
from freellm.store.base import StateStore
from freellm.store.memory import MemoryStore
from freellm.store.sqlite import SQLiteStore

KEY = bytes(range(32))
OTHER = bytes(range(100, 132))
THIRD = bytes(range(200, 232))
SLASHY = b"\xfb\xff\xbf" * 10 + b"\xfb\xff"
"""32 bytes whose standard base64 has '+' and '/' (and so '-' and '_' URL-safe)."""
SECRET = "sk-live-abcdefghijklmnopqrstuvwxyz-0123456789"
SECRET2 = "gsk_ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210"
T0 = 1_700_000_000.0


def fixed_clock(t: float = T0) -> Callable[[], float]:
    return lambda: t


# -- master key: parsing ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        KEY.hex(),
        KEY.hex().upper(),
        f"  {KEY.hex()}\n",
        base64.b64encode(KEY).decode(),
        base64.b64encode(KEY).decode().rstrip("="),
        base64.urlsafe_b64encode(KEY).decode(),
        base64.urlsafe_b64encode(KEY).decode().rstrip("="),
    ],
    ids=["hex", "HEX", "hex-spaced", "b64", "b64-unpadded", "urlsafe", "urlsafe-unpadded"],
)
def test_master_key_parses_hex_and_base64(text: str) -> None:
    assert parse_master_key(text, source="X") == KEY


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(SLASHY).decode(),
        base64.b64encode(SLASHY).decode().rstrip("="),
        base64.urlsafe_b64encode(SLASHY).decode(),
        base64.urlsafe_b64encode(SLASHY).decode().rstrip("="),
    ],
)
def test_master_key_both_base64_alphabets(text: str) -> None:
    assert any(c in text for c in "+/-_")
    assert parse_master_key(text, source="X") == SLASHY


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        (KEY.hex()[:-2], "62 characters, not 64"),
        (KEY.hex() + "ab", "66 characters, not 64"),
        (base64.b64encode(KEY[:16]).decode(), "decodes to 16 bytes"),
        (base64.b64encode(KEY[:31]).decode(), "decodes to 31 bytes"),
        (base64.b64encode(KEY + b"!").decode(), "decodes to 33 bytes"),
        ("correct horse battery staple, not a key!!!", "neither hex nor valid base64"),
        ("zz" * 32, "decodes to 48 bytes"),
        (base64.b64encode(KEY).decode() + "==", "too much '=' padding"),
        ("Q" * 45, "neither hex nor valid base64"),
    ],
)
def test_master_key_rejects_with_a_reason_and_never_the_value(text: str, expected: str) -> None:
    with pytest.raises(MasterKeyError) as caught:
        parse_master_key(text, source=MASTER_KEY_ENV)
    message = str(caught.value)
    assert expected in message
    assert MASTER_KEY_ENV in message and "expected 32 bytes" in message
    if text.strip():
        assert text.strip() not in message


# -- master key: sources ----------------------------------------------------------------------------------
def test_env_key_wins_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert load_master_key({MASTER_KEY_ENV: KEY.hex()}, data) == KEY
    assert not data.exists()


def test_bad_env_key_is_an_error_even_with_a_key_file(tmp_path: Path) -> None:
    write_master_key(tmp_path, KEY)
    with pytest.raises(MasterKeyError, match=MASTER_KEY_ENV):
        load_master_key({MASTER_KEY_ENV: "nope"}, tmp_path)


def test_missing_file_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    key = load_master_key({MASTER_KEY_ENV: "  "}, data)  # blank counts as unset
    path = data / "master.key"
    assert len(key) == 32
    assert path.read_text(encoding="ascii") == key.hex() + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_master_key({}, data) == key
    assert sorted(p.name for p in data.iterdir()) == ["master.key"]  # no temp file left behind


def test_a_key_file_created_meanwhile_is_kept(tmp_path: Path) -> None:
    """Two processes generating at once agree on the first file instead of replacing it."""
    write_master_key(tmp_path, KEY)
    assert _create_key_file(tmp_path / "master.key", OTHER) == KEY
    assert load_master_key({}, tmp_path) == KEY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["master.key"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_key_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = write_master_key(tmp_path, KEY)
    path.chmod(mode)
    with pytest.raises(MasterKeyError) as caught:
        load_master_key({}, tmp_path)
    message = str(caught.value)
    assert f"{mode:04o}" in message and "wider than 0600" in message
    assert f"chmod 600 {path}" in message
    assert KEY.hex() not in message
    path.chmod(0o400)  # narrower is fine
    assert load_master_key({}, tmp_path) == KEY


@pytest.mark.parametrize(
    "content",
    [b"", b"\n", b"not a key\n", KEY.hex()[:-1].encode() + b"\n", base64.b64encode(KEY) + b"\n", b"\xff" * 65],
    ids=["empty", "newline", "junk", "short-hex", "base64", "binary"],
)
def test_malformed_key_file_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "master.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    with pytest.raises(MasterKeyError, match="is malformed: expected 64 hex characters") as caught:
        load_master_key({}, tmp_path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == content  # never "repaired" by generating a new key over it


def test_write_master_key_replaces_atomically(tmp_path: Path) -> None:
    write_master_key(tmp_path, KEY)
    path = write_master_key(tmp_path, OTHER)
    assert load_master_key({}, tmp_path) == OTHER
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["master.key"]
    with pytest.raises(MasterKeyError, match="exactly 32 bytes"):
        write_master_key(tmp_path, KEY[:16])


# -- masking, validation, ids ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("secret", "shown"),
    [
        ("", "…"),
        ("abcde", "…"),
        ("abcdef", "…ef"),
        ("abcdefghijk", "…jk"),
        ("abcdefghijkl", "…ijkl"),
        (SECRET, "…6789"),
    ],
)
def test_mask(secret: str, shown: str) -> None:
    assert mask(secret) == shown


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "must be a string, not NoneType"),
        (123, "must be a string, not int"),
        (b"sk-bytes-key", "must be a string, not bytes"),
        ("", "is empty"),
        (" \t\n ", "only whitespace"),
        ("x" * (MAX_KEY_CHARS + 1), "over the limit of 4096"),
        ("sk-\x00abc", "control character (U+0000)"),
        ("sk-\x1babc", "control character (U+001B)"),
        ("sk-\x7fabc", "control character (U+007F)"),
        ("sk-\x9babc", "control character (U+009B)"),
        ("sk-\x85abc", "control character (U+0085)"),
        ("sk-abc def", "whitespace (SPACE)"),
        ("sk-abc\tdef", "control character (U+0009)"),
        ("sk-abc\u00a0def", "whitespace (NO-BREAK SPACE)"),
        ("sk-abc\u2003def", "whitespace (EM SPACE)"),
    ],
)
def test_validate_key_text_rejects_with_the_reason_only(value: object, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        validate_key_text(value)
    message = str(caught.value)
    assert reason in message
    if isinstance(value, str) and value.strip():
        assert value.strip() not in message and "abc" not in message


def test_validate_key_text_strips_and_accepts() -> None:
    assert validate_key_text(f"  {SECRET}\r\n") == SECRET
    assert validate_key_text("x" * MAX_KEY_CHARS) == "x" * MAX_KEY_CHARS
    assert validate_key_text("clé-ünïcode") == "clé-ünïcode"


def test_key_id_is_the_catalog_fingerprint() -> None:
    assert key_id(SECRET) == key_fingerprint(SECRET)
    assert key_id(SECRET) != key_id(SECRET2)


def test_stored_key_repr_hides_the_secret() -> None:
    stored = StoredKey(id=key_id(SECRET), provider="groq", secret=SECRET, enabled=True, added_at=T0)
    for text in (repr(stored), str(stored), repr([stored]), f"{stored}"):
        assert SECRET not in text
        assert "…6789" in text and stored.id in text


# -- the vault over real stores ----------------------------------------------------------------------------------
def db_bytes(tmp_path: Path) -> bytes:
    """Every SQLite file of the store (the database, its WAL and shared-memory files)."""
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("freellm.db*")))


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    s: StateStore = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "freellm.db")
    await s.open()
    try:
        yield s
    finally:
        await s.close()


async def stored_doc(store: StateStore) -> dict[str, Any]:
    raw = await store.get_setting(SETTING_NAME)
    assert raw is not None
    doc = orjson.loads(raw)
    assert isinstance(doc, dict)
    return doc


async def test_round_trip_and_setting_format(store: StateStore) -> None:
    vault = KeyVault(store, KEY, clock=fixed_clock())
    assert await vault.load() == []
    added = await vault.add("groq", f" {SECRET}\n")
    assert added == StoredKey(id=key_id(SECRET), provider="groq", secret=SECRET, enabled=True, added_at=T0)
    await vault.add("groq", SECRET2)
    await vault.add("gemini", SECRET)  # the same key at another provider is another record

    doc = await stored_doc(store)
    assert doc["version"] == 1
    assert [(r["provider"], r["id"]) for r in doc["keys"]] == [
        ("groq", key_id(SECRET)),
        ("groq", key_id(SECRET2)),
        ("gemini", key_id(SECRET)),
    ]
    for record in doc["keys"]:
        assert set(record) == {"id", "provider", "nonce", "ct", "enabled", "added_at"}
        assert len(base64.b64decode(record["nonce"])) == 12
        assert record["enabled"] is True and record["added_at"] == T0
    assert doc["keys"][0]["nonce"] != doc["keys"][2]["nonce"]  # a fresh nonce per encryption
    assert doc["keys"][0]["ct"] != doc["keys"][2]["ct"]

    again = KeyVault(store, KEY)
    assert await again.load() == vault.keys()
    assert [k.secret for k in again.keys("groq")] == [SECRET, SECRET2]
    assert [k.secret for k in again.keys("gemini")] == [SECRET]
    assert again.keys("nobody") == []


async def test_plaintext_never_in_the_setting_repr_or_sqlite_files(tmp_path: Path) -> None:
    path = tmp_path / "freellm.db"
    s1 = SQLiteStore(path, flush_interval_s=3600)
    await s1.open()
    vault = KeyVault(s1, KEY)
    await vault.load()
    stored = await vault.add("groq", SECRET)
    await vault.add("mistral", SECRET2)
    # Persisted before add() returned (flush_interval_s is an hour): the id is on disk already.
    on_disk = db_bytes(tmp_path)
    assert stored.id.encode() in on_disk
    for secret in (SECRET, SECRET2):
        assert secret.encode() not in on_disk
        assert secret[4:20].encode() not in on_disk
        assert secret not in (await s1.get_setting(SETTING_NAME) or "")
        assert secret not in repr(vault.keys()) and secret not in repr(vault)
    assert KEY.hex().encode() not in on_disk and KEY not in on_disk
    await s1.close()

    on_disk = db_bytes(tmp_path)
    assert stored.id.encode() in on_disk and SECRET.encode() not in on_disk
    s2 = SQLiteStore(path)
    await s2.open()
    try:
        assert [k.secret for k in await KeyVault(s2, KEY).load()] == [SECRET, SECRET2]
    finally:
        await s2.close()


async def test_two_processes_changing_keys_keep_each_others(tmp_path: Path) -> None:
    """A gateway and ``freellm keys --config`` (or two workers) on one database: each change starts from
    what the other wrote, and ``refresh_settings`` reports exactly the other's writes."""
    path = tmp_path / "freellm.db"
    gateway, cli = SQLiteStore(path, flush_interval_s=3600), SQLiteStore(path, flush_interval_s=3600)
    await gateway.open()
    await cli.open()
    try:
        served, changer = KeyVault(gateway, KEY), KeyVault(cli, KEY)
        assert await served.load() == [] and await changer.load() == []
        await changer.add("groq", SECRET)  # the gateway's vault has not seen it…
        await served.add("mistral", SECRET2)  # …and its change keeps it
        kept = served.keys(None)
        assert [(k.provider, k.secret) for k in kept] == [("groq", SECRET), ("mistral", SECRET2)]
        assert SETTING_NAME in await cli.refresh_settings([SETTING_NAME, "unrelated"])
        assert await cli.refresh_settings([SETTING_NAME]) == {}  # nothing new since
        assert [k.secret for k in await changer.load()] == [SECRET, SECRET2]
        assert await changer.remove("groq", key_id(SECRET))
        assert await served.set_enabled("mistral", key_id(SECRET2), False)
        assert [(k.provider, k.enabled) for k in await KeyVault(cli, KEY).load()] == [("mistral", False)]
    finally:
        await cli.close()
        await gateway.close()


async def test_a_record_moved_to_another_provider_does_not_decrypt(store: StateStore) -> None:
    vault = KeyVault(store, KEY)
    stored = await vault.add("groq", SECRET)
    doc = await stored_doc(store)
    doc["keys"][0]["provider"] = "gemini"
    await store.set_setting(SETTING_NAME, orjson.dumps(doc).decode())
    with pytest.raises(MasterKeyError, match="cannot be decrypted with this master key") as caught:
        await KeyVault(store, KEY).load()
    assert stored.id in str(caught.value) and SECRET not in str(caught.value)


async def test_a_record_given_another_id_does_not_decrypt(store: StateStore) -> None:
    await KeyVault(store, KEY).add("groq", SECRET)
    doc = await stored_doc(store)
    doc["keys"][0]["id"] = key_id(SECRET2)
    await store.set_setting(SETTING_NAME, orjson.dumps(doc).decode())
    with pytest.raises(MasterKeyError):
        await KeyVault(store, KEY).load()


async def test_wrong_master_key_is_a_master_key_error(store: StateStore) -> None:
    stored = await KeyVault(store, KEY).add("groq", SECRET)
    wrong = KeyVault(store, OTHER)
    with pytest.raises(MasterKeyError, match="cannot be decrypted with this master key") as caught:
        await wrong.load()
    assert stored.id in str(caught.value)
    with pytest.raises(MasterKeyError):  # a write loads first, so it cannot replace what it cannot read
        await wrong.add("groq", SECRET2)
    assert [k.secret for k in await KeyVault(store, KEY).load()] == [SECRET]


async def test_master_key_must_be_32_bytes(store: StateStore) -> None:
    with pytest.raises(MasterKeyError, match="exactly 32 bytes"):
        KeyVault(store, KEY[:16])


async def test_duplicates_and_bad_input_change_nothing(store: StateStore) -> None:
    vault = KeyVault(store, KEY)
    await vault.add("groq", SECRET)
    before = await store.get_setting(SETTING_NAME)
    with pytest.raises(ValueError, match="already added") as caught:
        await vault.add("groq", f"{SECRET}\n")
    assert key_id(SECRET) in str(caught.value) and SECRET not in str(caught.value)
    with pytest.raises(ValueError, match="whitespace"):
        await vault.add("groq", "sk bad")
    for provider in ("", "gro\x1fq"):
        with pytest.raises(ValueError, match="provider name"):
            await vault.add(provider, SECRET2)
    assert await store.get_setting(SETTING_NAME) == before
    assert [k.secret for k in vault.keys("groq")] == [SECRET]


async def test_remove_and_set_enabled_persist(store: StateStore) -> None:
    vault = KeyVault(store, KEY)
    a = await vault.add("groq", SECRET)
    b = await vault.add("groq", SECRET2)
    assert await vault.set_enabled("groq", a.id, False) is True
    assert await vault.set_enabled("gemini", a.id, False) is False
    assert await vault.set_enabled("groq", "0" * 16, True) is False
    assert [(k.id, k.enabled) for k in await KeyVault(store, KEY).load()] == [(a.id, False), (b.id, True)]

    assert await vault.remove("gemini", b.id) is False
    assert await vault.remove("groq", b.id) is True
    assert await vault.remove("groq", b.id) is False
    reloaded = await KeyVault(store, KEY).load()
    assert [(k.id, k.enabled, k.secret) for k in reloaded] == [(a.id, False, SECRET)]


class CountingStore(MemoryStore):
    """A real MemoryStore that counts setting writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def set_setting(self, name: str, value: str) -> None:
        self.writes += 1
        await super().set_setting(name, value)


async def test_no_op_changes_do_not_write() -> None:
    store = CountingStore()
    vault = KeyVault(store, KEY)
    a = await vault.add("groq", SECRET)
    assert store.writes == 1
    assert await vault.set_enabled("groq", a.id, True) is True
    assert await vault.remove("groq", "0" * 16) is False
    assert store.writes == 1


async def test_keys_before_load_is_an_error_and_a_write_loads_first(store: StateStore) -> None:
    await KeyVault(store, KEY).add("groq", SECRET)
    fresh = KeyVault(store, KEY)
    with pytest.raises(RuntimeError, match="before load"):
        fresh.keys()
    await fresh.add("groq", SECRET2)  # never starts from an empty list
    assert [k.secret for k in await KeyVault(store, KEY).load()] == [SECRET, SECRET2]


async def test_concurrent_adds_are_all_kept(store: StateStore) -> None:
    vault = KeyVault(store, KEY)
    secrets = [f"sk-concurrent-{i:04d}-abcdefgh" for i in range(25)]
    await asyncio.gather(*(vault.add("groq", s) for s in secrets))
    assert sorted(k.secret for k in await KeyVault(store, KEY).load()) == sorted(secrets)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{not json", "damaged: not JSON"),
        ("[1, 2]", "damaged: not a JSON object"),
        ('{"version": 2, "keys": []}', "format version 2"),
        ('{"version": 1, "keys": {}}', "'keys' is not a list"),
        ('{"version": 1, "keys": [{"id": "x"}]}', "record 0 has no id or provider"),
        (
            '{"version": 1, "keys": [{"id": "x", "provider": "p", "enabled": true, "added_at": 1,'
            ' "nonce": "!!", "ct": "AA=="}]}',
            "not base64",
        ),
    ],
)
async def test_a_damaged_setting_is_an_error_never_forgotten(store: StateStore, raw: str, expected: str) -> None:
    await store.set_setting(SETTING_NAME, raw)
    vault = KeyVault(store, KEY)
    with pytest.raises(VaultError, match=expected):
        await vault.load()
    with pytest.raises(VaultError):
        await vault.add("groq", SECRET)
    assert await store.get_setting(SETTING_NAME) == raw


# -- rotation ------------------------------------------------------------------------------------------------
async def test_rotate_then_load_with_the_new_master(store: StateStore, tmp_path: Path) -> None:
    vault = KeyVault(store, KEY)
    await vault.add("groq", SECRET)
    assert await vault.set_enabled("mistral", (await vault.add("mistral", SECRET2)).id, False)
    before = await stored_doc(store)
    saved: list[bytes] = []

    def save(key: bytes) -> None:
        saved.append(key)
        write_master_key(tmp_path, key)

    assert await vault.rotate(OTHER, save) == 2
    assert saved == [OTHER]
    assert load_master_key({}, tmp_path) == OTHER
    after = await stored_doc(store)
    assert all(set(r) == {"id", "provider", "nonce", "ct", "enabled", "added_at"} for r in after["keys"])
    assert [r["ct"] for r in after["keys"]] != [r["ct"] for r in before["keys"]]

    loaded = await KeyVault(store, OTHER).load()
    assert [(k.provider, k.secret, k.enabled) for k in loaded] == [("groq", SECRET, True), ("mistral", SECRET2, False)]
    with pytest.raises(MasterKeyError):
        await KeyVault(store, KEY).load()
    await vault.add("gemini", SECRET)  # the rotated vault goes on under the new master
    assert len(await KeyVault(store, OTHER).load()) == 3
    with pytest.raises(ValueError, match="the current one"):
        await vault.rotate(OTHER, save)


class Crash(BaseException):
    """The process dying at this point (nothing after it runs)."""


def crash(key: bytes) -> None:
    """A ``save_master`` that dies before saving anything."""
    raise Crash


async def reopen(tmp_path: Path, store: StateStore) -> StateStore:
    """The store as the next process sees it: SQLite is closed and opened again; memory is kept."""
    if isinstance(store, SQLiteStore):
        await store.close()
        fresh = SQLiteStore(tmp_path / "freellm.db")
        await fresh.open()
        return fresh
    return store


async def test_crash_before_the_new_master_is_saved_rolls_back(store: StateStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    master = load_master_key({}, data)
    vault = KeyVault(store, master)
    await vault.add("groq", SECRET)
    with pytest.raises(Crash):
        await vault.rotate(OTHER, crash)
    doc = await stored_doc(store)  # what a dead process left: both masters open every record
    assert all(set(r["prev"]) == {"nonce", "ct"} for r in doc["keys"])
    assert SECRET not in orjson.dumps(doc).decode()
    with pytest.raises(MasterKeyError, match="rotation failed part way"):
        await vault.add("groq", SECRET2)  # this vault no longer knows which master is on disk

    store = await reopen(tmp_path, store)
    try:
        restarted = KeyVault(store, load_master_key({}, data))
        assert [k.secret for k in await restarted.load()] == [SECRET]
        doc = await stored_doc(store)
        assert all("prev" not in r for r in doc["keys"])  # load() rolled the half rotation back
        with pytest.raises(MasterKeyError):
            await KeyVault(store, OTHER).load()
    finally:
        if isinstance(store, SQLiteStore):
            await store.close()


async def test_crash_after_the_new_master_is_saved_completes(store: StateStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    vault = KeyVault(store, load_master_key({}, data))
    await vault.add("groq", SECRET)
    await vault.add("mistral", SECRET2)

    def save_then_crash(key: bytes) -> None:
        write_master_key(data, key)
        raise Crash

    with pytest.raises(Crash):
        await vault.rotate(OTHER, save_then_crash)
    store = await reopen(tmp_path, store)
    try:
        assert load_master_key({}, data) == OTHER
        restarted = KeyVault(store, load_master_key({}, data))
        assert [k.secret for k in await restarted.load()] == [SECRET, SECRET2]
        doc = await stored_doc(store)
        assert all("prev" not in r for r in doc["keys"])  # load() finished the rotation
        with pytest.raises(MasterKeyError):
            await KeyVault(store, KEY).load()
    finally:
        if isinstance(store, SQLiteStore):
            await store.close()


async def test_env_master_rotation_interrupted_opens_with_either_value(store: StateStore) -> None:
    """With FREELLM_MASTER_KEY the new value is shown, not written: until the rotation finishes, both
    values open the store (whichever the operator starts with wins)."""
    vault = KeyVault(store, KEY)
    await vault.add("groq", SECRET)
    with pytest.raises(Crash):
        await vault.rotate(OTHER, crash)
    raw = await store.get_setting(SETTING_NAME)
    for master in (KEY, OTHER):
        await store.set_setting(SETTING_NAME, raw or "")
        assert [k.secret for k in await KeyVault(store, master).load()] == [SECRET]
    with pytest.raises(MasterKeyError):
        await KeyVault(store, THIRD).load()


def test_leftover_temp_files_are_never_read(tmp_path: Path) -> None:
    write_master_key(tmp_path, KEY)
    (tmp_path / "master.key.abcdef012345.tmp").write_text(OTHER.hex() + "\n", encoding="ascii")
    assert load_master_key({}, tmp_path) == KEY


def test_importing_the_server_does_not_load_cryptography() -> None:
    code = "import sys, freellm.server.app, freellm.cli, freellm.secrets; print('cryptography' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
