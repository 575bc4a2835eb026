"""The master key: the one secret that opens every provider key stored at run time.

Where it comes from, in order:

1. ``FREELLM_MASTER_KEY`` when set and not blank — 32 bytes as 64 hex characters or as base64
   (standard or URL-safe alphabet, ``=`` padding optional). Nothing is written to disk: an operator who
   keeps the key in a secret manager never wants a copy next to the database it protects.
2. Else ``<data_dir>/master.key`` — the stored form is 64 lowercase hex characters and a newline, mode
   ``0600``. It is generated on first use.

Every failure is a :class:`MasterKeyError` whose message says what is wrong and how to fix it, and never
contains the key (or what was given in its place).

Files are written atomically: a uniquely named temp file created with mode ``0600`` (so the key is never
readable by others, not even for an instant), flushed to disk, then moved into place. The first key is
linked into place without replacing anything, so two processes starting at once agree on one key instead
of each keeping its own. A crash mid-write can leave a ``master.key.*.tmp`` file; it is never read.

Rotation (see :meth:`freellm.secrets.vault.KeyVault.rotate`) writes the store first, in a form both the
old and the new key open, and only then replaces ``master.key`` with :func:`write_master_key` — so this
module never has to guess whether a half-finished rotation happened: whichever key ``master.key`` holds
opens the stored keys.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = [
    "MASTER_KEY_BYTES",
    "MASTER_KEY_ENV",
    "MASTER_KEY_FILENAME",
    "MasterKeyError",
    "load_master_key",
    "master_key_from_env",
    "parse_master_key",
    "write_master_key",
]

MASTER_KEY_ENV: Final = "FREELLM_MASTER_KEY"
MASTER_KEY_FILENAME: Final = "master.key"
MASTER_KEY_BYTES: Final = 32
"""AES-256: the key is exactly 32 bytes."""

_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")
_EXPECTED: Final = (
    f"expected {MASTER_KEY_BYTES} bytes as 64 hex characters or as base64 (44 characters, or 43 without "
    "the '=' padding; standard or URL-safe alphabet)"
)


class MasterKeyError(Exception):
    """The master key is missing, malformed, unsafe to use, or does not open the stored keys.

    The message is meant for the operator as is (the CLI prints it after ``freellm:``): it names the
    source (the variable or the file), what is wrong and what is expected — never the key itself.
    """


def parse_master_key(text: str, *, source: str) -> bytes:
    """The 32 key bytes written as hex or base64 in ``text`` (surrounding whitespace ignored).

    ``source`` names where the text came from (``FREELLM_MASTER_KEY``, a file) for the error message.
    Hex is tried first: 64 hex characters are also valid base64, but of 48 bytes.
    """
    value = text.strip()
    if not value:
        raise MasterKeyError(f"{source} is empty; {_EXPECTED}")
    if all(c in _HEX_DIGITS for c in value):
        if len(value) == 2 * MASTER_KEY_BYTES:
            return bytes.fromhex(value)
        if len(value) != 43:  # 43 hex-looking characters could still be unpadded base64 of 32 bytes
            raise MasterKeyError(f"{source} looks like hex but is {len(value)} characters, not 64; {_EXPECTED}")
    # One alphabet for both variants, padding restored: validate=True rejects anything else.
    normal = value.replace("-", "+").replace("_", "/").rstrip("=")
    if len(value) - len(normal) > 2:
        raise MasterKeyError(f"{source} is not valid base64 (too much '=' padding); {_EXPECTED}")
    try:
        raw = base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise MasterKeyError(f"{source} is neither hex nor valid base64; {_EXPECTED}") from None
    if len(raw) != MASTER_KEY_BYTES:
        raise MasterKeyError(f"{source} decodes to {len(raw)} bytes, not {MASTER_KEY_BYTES}; {_EXPECTED}")
    return raw


def master_key_from_env(env: Mapping[str, str]) -> bytes | None:
    """The key ``FREELLM_MASTER_KEY`` holds, or None when it is unset or blank."""
    text = env.get(MASTER_KEY_ENV, "")
    if not text.strip():
        return None
    return parse_master_key(text, source=MASTER_KEY_ENV)


def load_master_key(env: Mapping[str, str], data_dir: Path) -> bytes:
    """The master key: ``FREELLM_MASTER_KEY`` if set, else ``data_dir/master.key`` (generated when missing).

    Raises :class:`MasterKeyError` for a malformed variable, and for a key file that is malformed,
    unreadable or readable by anyone but its owner (a world-readable key protects nothing).
    """
    from_env = master_key_from_env(env)
    if from_env is not None:
        return from_env
    path = Path(data_dir) / MASTER_KEY_FILENAME
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        pass
    return _create_key_file(path, secrets.token_bytes(MASTER_KEY_BYTES))


def write_master_key(data_dir: Path, key: bytes) -> Path:
    """Replace ``data_dir/master.key`` with ``key`` atomically (readers see the old key or the new one).

    Used by rotation, *after* the store holds the provider keys in a form the new key opens (see
    :meth:`KeyVault.rotate`): calling it earlier would leave stored keys that nothing on disk opens.
    Returns the file's path.
    """
    _check_key_bytes(key)
    path = Path(data_dir) / MASTER_KEY_FILENAME
    tmp = _write_temp(path, key)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _sync_dir(path.parent)
    return path


# -- helpers ----------------------------------------------------------------------------------------------
def _check_key_bytes(key: bytes) -> None:
    if not isinstance(key, bytes) or len(key) != MASTER_KEY_BYTES:
        raise MasterKeyError(f"a master key must be exactly {MASTER_KEY_BYTES} bytes")


def _read_key_file(path: Path) -> bytes:
    """The key in ``path``; FileNotFoundError when there is none (the caller generates one)."""
    try:
        fd = os.open(path, os.O_RDONLY)  # symlinks are fine (secret mounts use them); the target is checked
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise MasterKeyError(
            f"cannot read master key file {path}: {exc.strerror or exc}; fix its ownership or permissions "
            f"(it must be readable by the gateway's user, mode 0600), or set {MASTER_KEY_ENV}"
        ) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise MasterKeyError(f"master key file {path} is not a regular file; replace it with the key file")
        mode = stat.S_IMODE(st.st_mode)
        if os.name == "posix" and mode & 0o077:
            raise MasterKeyError(
                f"master key file {path} has permissions {mode:04o}, wider than 0600: other users could "
                f"read the key that decrypts the stored provider keys; fix with `chmod 600 {path}`"
            )
        data = f.read(4 * MASTER_KEY_BYTES + 1)  # far more than a valid file holds: never read a huge one
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    value = text.strip()
    if len(value) != 2 * MASTER_KEY_BYTES or not all(c in _HEX_DIGITS for c in value):
        raise MasterKeyError(
            f"master key file {path} is malformed: expected 64 hex characters and a newline "
            f"({MASTER_KEY_BYTES} bytes); restore it from a backup, or set {MASTER_KEY_ENV}. Deleting it "
            "makes every provider key stored at run time unreadable"
        )
    return bytes.fromhex(value)


def _create_key_file(path: Path, key: bytes) -> bytes:
    """Store a freshly generated ``key`` at ``path`` unless another process got there first.

    The temp file is hard-linked into place, which fails instead of replacing an existing file: a second
    process starting at the same moment then reads the first one's key rather than overwriting it (it
    may already have encrypted something with it). A file system without hard links falls back to
    ``os.replace``.
    """
    tmp = _write_temp(path, key)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return _read_key_file(path)
        except OSError:
            os.replace(tmp, path)
    finally:
        _unlink_quietly(tmp)
    _sync_dir(path.parent)
    return key


def _write_temp(path: Path, key: bytes) -> Path:
    """A new ``0600`` file next to ``path`` holding ``key`` in the stored form, flushed to disk."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write((key.hex() + "\n").encode("ascii"))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _sync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (POSIX; a no-op where directories cannot be opened)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
