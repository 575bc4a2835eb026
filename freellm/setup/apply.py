"""Every read and write ``freellm setup`` makes: plan, backups, manifest, atomic writes, undo.

The order is what keeps a user's files safe:

1. :func:`plan` reads and parses every file the client uses and renders every new content. Any file that
   cannot be read or parsed raises :class:`SetupError` naming it — before anything is written.
2. :func:`apply` creates the missing directories, copies each file it will change to
   ``<file>.freellm-backup`` (byte for byte, same mode), writes the manifest, then replaces each file
   atomically (a temp file in the same directory, then ``os.replace``), so a crash leaves the old file or
   the new one, never half of either.
3. :func:`undo` reads the manifest, moves each backup back over its file, removes the files and the (now
   empty) directories setup created, and the manifest.

The manifest sits next to the client's first file (``<file>.freellm-setup.json``). Running setup again
keeps the first run's backups and "created" records, so undo always returns to the state before the
first run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from freellm.setup.merge import Client, ClientFile, Locations, ParseError, Target, mask_key

__all__ = [
    "BACKUP_SUFFIX",
    "MANIFEST_SUFFIX",
    "Change",
    "Plan",
    "SetupError",
    "apply",
    "locations",
    "manifest_path",
    "plan",
    "render_preview",
    "undo",
]

BACKUP_SUFFIX: Final = ".freellm-backup"
MANIFEST_SUFFIX: Final = ".freellm-setup.json"
MANIFEST_VERSION: Final = 1
SECRET_MODE: Final = 0o600
PLAIN_MODE: Final = 0o644


class SetupError(Exception):
    """What to tell the user (after ``freellm:``) and the exit code: 2 when setup cannot be done as asked
    (raised by :func:`plan` or the checks at the start of :func:`undo`: nothing was written), 1 when a
    write failed."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def locations(env: Mapping[str, str]) -> Locations:
    """``Path.home()`` (which honours ``$HOME``) and ``$XDG_CONFIG_HOME`` (an absolute path, as the XDG spec
    requires; else ``~/.config``)."""
    home = Path.home()
    xdg = env.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return Locations(home=home, config_home=config_home)


def _real(path: Path) -> Path:
    """A symlinked config (a dotfiles repository) is edited where it lives, keeping the link."""
    return path.resolve() if path.is_symlink() else path


def manifest_path(client: Client, loc: Locations) -> Path:
    first = _real(client.files[0].locate(loc))
    return first.with_name(first.name + MANIFEST_SUFFIX)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Change:
    """One file of the plan: its old bytes (None: it does not exist), the new ones, and the mode to write."""

    spec: ClientFile
    path: Path
    old: bytes | None
    new: bytes
    mode: int

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass(frozen=True)
class Plan:
    client: Client
    target: Target
    changes: tuple[Change, ...]
    manifest: Path
    previous: dict[str, Any] | None
    """The manifest of an earlier run, if any: its backups are the ones undo must restore."""
    notes: tuple[str, ...] = field(default_factory=tuple)


def _read(path: Path) -> bytes | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SetupError(f"{path} exists but is not a regular file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror or exc}") from None


def _load_manifest(path: Path) -> dict[str, Any] | None:
    raw = _read(path)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("version") != MANIFEST_VERSION or not isinstance(doc.get("files"), list):
        raise SetupError(f"{path} is not a freellm setup manifest this version understands; move it away")
    return doc


def _mode_for(spec: ClientFile, path: Path, exists: bool) -> int:
    if spec.secret:
        return SECRET_MODE
    if exists:
        return stat.S_IMODE(path.stat().st_mode)
    return SECRET_MODE if spec.holds_key else PLAIN_MODE


def plan(client: Client, target: Target, loc: Locations) -> Plan:
    """Read, parse and render every file of ``client``; nothing is written. Raises :class:`SetupError`
    naming the first file that cannot be read or parsed."""
    manifest = manifest_path(client, loc)
    previous = _load_manifest(manifest)
    recorded = {e.get("path") for e in previous["files"]} if previous else set()
    changes: list[Change] = []
    for spec in client.files:
        path = _real(spec.locate(loc))
        old = _read(path)
        if old is not None and str(path) not in recorded and _read(backup_path(path)) is not None:
            raise SetupError(
                f"{backup_path(path)} already exists and no setup manifest ({manifest}) lists it: it may be "
                "the only copy of your original file. Move it away, then run setup again"
            )
        try:
            text = None if old is None else old.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SetupError(f"cannot parse {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        try:
            new = spec.render(text, target)
        except ParseError as exc:
            raise SetupError(f"cannot parse {path}: {exc}; nothing was changed") from None
        changes.append(Change(spec, path, old, new.encode("utf-8"), _mode_for(spec, path, old is not None)))
    return Plan(client, target, tuple(changes), manifest, previous)


def render_preview(p: Plan, show_key: bool) -> str:
    """What ``--print`` shows: each file's path, whether it would be created or changed, and its whole new
    content — with the key masked unless ``show_key``."""
    parts: list[str] = []
    for ch in p.changes:
        if not ch.changed:
            state = "unchanged"
        elif ch.old is None:
            state = f"would be created, mode {ch.mode:04o}"
        else:
            state = f"would be changed (backup: {backup_path(ch.path)}), mode {ch.mode:04o}"
        body = ch.new.decode("utf-8")
        if not show_key and p.target.key:
            body = body.replace(p.target.key, mask_key(p.target.key))
        parts.append(f"--- {ch.path} ({state})\n{body}")
    return "\n".join(parts)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".freellm-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _missing_dirs(directory: Path) -> list[Path]:
    """The directories ``mkdir -p directory`` would create, outermost first."""
    missing: list[Path] = []
    d = directory
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    return list(reversed(missing))


def apply(p: Plan, log: Callable[[str], None] = lambda _msg: None) -> list[Path]:
    """Write the plan: directories, backups, manifest, then the files. Returns the files written."""
    previous = p.previous or {"files": [], "created_dirs": []}
    entries: dict[str, dict[str, Any]] = {e["path"]: dict(e) for e in previous["files"]}
    created_dirs: list[str] = list(previous.get("created_dirs", []))
    todo = [ch for ch in p.changes if ch.changed]
    if not todo:
        return []
    try:
        for d in _missing_dirs(p.manifest.parent) + [
            d for ch in todo for d in _missing_dirs(ch.path.parent)
        ]:
            if not d.exists():
                d.mkdir(mode=0o700 if d.name.startswith(".") else 0o755)
                created_dirs.append(str(d))
        for ch in todo:
            key = str(ch.path)
            if key not in entries:
                entries[key] = {"path": key, "created": ch.old is None}
                if ch.old is not None:
                    backup = backup_path(ch.path)
                    _atomic_write(backup, ch.old, stat.S_IMODE(ch.path.stat().st_mode))
                    entries[key]["backup"] = str(backup)
                    log(f"backed up {ch.path} to {backup}")
            entries[key]["written_sha256"] = _sha256(ch.new)
        manifest = {
            "version": MANIFEST_VERSION,
            "client": p.client.name,
            "files": list(entries.values()),
            "created_dirs": created_dirs,
        }
        _atomic_write(p.manifest, (json.dumps(manifest, indent=2) + "\n").encode(), SECRET_MODE)
        for ch in todo:
            _atomic_write(ch.path, ch.new, ch.mode)
            log(f"{'created' if ch.old is None else 'updated'} {ch.path}")
    except OSError as exc:
        raise SetupError(f"cannot write {exc.filename or 'a file'}: {exc.strerror or exc}", exit_code=1) from None
    return [ch.path for ch in todo]


def undo(
    client: Client, loc: Locations, log: Callable[[str], None] = lambda _msg: None, *, dry_run: bool = False
) -> bool:
    """Put back what setup changed for ``client``. False when there is nothing to undo (no manifest).

    Every backup is checked before anything moves, so a missing one stops undo with the files untouched.
    ``dry_run`` only logs what would be done."""
    mpath = manifest_path(client, loc)
    manifest = _load_manifest(mpath)
    if manifest is None:
        return False
    entries = manifest["files"]
    for e in entries:
        if not e.get("created") and _read(Path(e["backup"])) is None:
            raise SetupError(f"the backup {e['backup']} of {e['path']} is missing; nothing was changed")
    if dry_run:
        for e in entries:
            if e.get("created"):
                log(f"would remove {e['path']}")
            else:
                log(f"would restore {e['path']} from {e['backup']}")
        log(f"would remove {mpath}")
        return True
    try:
        for e in entries:
            path = Path(e["path"])
            current = _read(path)
            if current is not None and e.get("written_sha256") not in (None, _sha256(current)):
                log(f"warning: {path} changed after setup; those changes are discarded")
            if e.get("created"):
                if current is not None:
                    path.unlink()
                log(f"removed {path}")
            else:
                os.replace(e["backup"], path)
                log(f"restored {path}")
        mpath.unlink()
        for d in sorted(manifest.get("created_dirs", []), key=lambda s: len(Path(s).parts), reverse=True):
            with contextlib.suppress(OSError):  # not empty: something else lives there now
                Path(d).rmdir()
    except OSError as exc:
        raise SetupError(f"cannot undo {exc.filename or ''}: {exc.strerror or exc}", exit_code=1) from None
    return True
