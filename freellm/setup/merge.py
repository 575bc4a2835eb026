"""Pure helpers the client modules share: parse an existing file, change only the keys setup owns, render
it back. No IO here — each function maps old text to new text, so every merge is tested on its own.

An existing file that cannot be parsed raises :class:`ParseError`; the IO layer adds the file name and stops
before anything is written (overwriting a file we could not read would lose the user's settings).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = [
    "Client",
    "ClientFile",
    "Locations",
    "ParseError",
    "Target",
    "dump_json",
    "load_json_object",
    "mask_key",
    "merge_dotenv",
    "merge_yaml_mapping",
    "set_in",
]

DEFAULT_MODEL: Final = "auto"
"""The model a client asks for when ``--model`` is not given: the gateway's configured chain."""


class ParseError(ValueError):
    """An existing file is not what its client expects (bad syntax, or a key of the wrong type)."""


@dataclass(frozen=True)
class Target:
    """What a client is pointed at: the gateway's root URL (no ``/v1``), a client key, the model, and the
    gateway's model ids (from ``GET /v1/models`` when it answered; empty otherwise)."""

    base_url: str
    key: str
    model: str | None = None
    models: tuple[str, ...] = field(default_factory=tuple)

    @property
    def v1(self) -> str:
        """The OpenAI-style base URL: the root plus ``/v1`` (clients append ``/chat/completions`` etc.)."""
        return self.base_url.rstrip("/") + "/v1"

    @property
    def model_or_default(self) -> str:
        return self.model or DEFAULT_MODEL


@dataclass(frozen=True)
class Locations:
    """Where clients keep their configuration: ``$HOME`` and ``$XDG_CONFIG_HOME`` (default ``~/.config``)."""

    home: Path
    config_home: Path


Render = Callable[[str | None, Target], str]
"""Old file text (None: no file) and the target → the new file text. Raises :class:`ParseError`."""


@dataclass(frozen=True)
class ClientFile:
    """One file a client reads, and how setup rewrites it."""

    label: str
    """How the docs and messages name it, e.g. ``~/.claude/settings.json``."""
    locate: Callable[[Locations], Path]
    render: Render
    holds_key: bool
    """A new file holding the key is created 0600 (an existing one keeps its mode)."""
    secret: bool = False
    """A secrets file (``.env``): always 0600, whatever mode it had."""


@dataclass(frozen=True)
class Client:
    """A client setup knows: its files, in the order they are written, and how to run it afterwards."""

    name: str
    title: str
    files: tuple[ClientFile, ...]
    run_hint: str
    lists_models: bool = False
    """Its config names the gateway's models: setup asks the gateway for ``GET /v1/models`` first."""


def mask_key(key: str) -> str:
    """How ``--print`` shows the key: its last four characters only (never more than a third of it)."""
    if len(key) >= 12:
        return "…" + key[-4:]
    if len(key) >= 6:
        return "…" + key[-2:]
    return "…"


# -- JSON ---------------------------------------------------------------------------------------------------
def load_json_object(text: str | None) -> dict[str, Any]:
    """An existing JSON settings file as a dict; a missing or blank file is an empty one."""
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); comments and trailing "
            "commas are not supported — fix or move the file and run setup again"
        ) from None
    if not isinstance(doc, dict):
        raise ParseError(f"expected a JSON object at the top level, found {type(doc).__name__}")
    return doc


_INDENT = re.compile(r"^\n?([ \t]+)\S", re.MULTILINE)


def dump_json(doc: Mapping[str, Any], old: str | None = None) -> str:
    """JSON with the old file's indentation (2 spaces for a new file), key order kept, one final newline."""
    indent: int | str = 2
    if old:
        m = _INDENT.search(old)
        if m:
            ws = m.group(1)
            indent = ws if "\t" in ws else len(ws)
    return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"


def set_in(doc: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """``doc[a][b]… = value``, creating the objects on the way. A key on the way that holds something other
    than an object stops setup (replacing it would drop what the user put there)."""
    node = doc
    for i, key in enumerate(path[:-1]):
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        elif not isinstance(child, dict):
            where = ".".join(path[: i + 1])
            raise ParseError(f"`{where}` is a {type(child).__name__}, expected an object")
        node = child
    node[path[-1]] = value


# -- .env ---------------------------------------------------------------------------------------------------
_SAFE_ENV_VALUE = re.compile(r"^[A-Za-z0-9_./:@+~%,=-]*$")


def _env_value(value: str) -> str:
    if _SAFE_ENV_VALUE.match(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def merge_dotenv(old: str | None, values: Mapping[str, str]) -> str:
    """Set ``KEY=value`` lines in a dotenv file: an existing assignment (``KEY=``, ``export KEY=``) is replaced
    in place, a missing one appended; every other line — comments, blank lines, other variables — is kept as
    it was. dotenv readers skip lines they do not understand, so no content makes the file unparseable."""
    lines = (old or "").splitlines(keepends=True)
    pending = dict(values)
    out: list[str] = []
    for line in lines:
        m = re.match(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=", line)
        if m and m.group(1) in values:
            name = m.group(1)
            if name in pending:
                ending = "\n" if line.endswith("\n") else ""
                out.append(f"{name}={_env_value(pending.pop(name))}{ending}")
            # a second assignment of the same name would win over ours in most readers: drop it
            continue
        out.append(line)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    out.extend(f"{name}={_env_value(value)}\n" for name, value in pending.items())
    return "".join(out)


# -- YAML ---------------------------------------------------------------------------------------------------
def _load_yaml_mapping(text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParseError(f"not valid YAML{where}: {problem}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ParseError(f"expected a YAML mapping at the top level, found {type(doc).__name__}")
    return doc


def _yaml_line(key: str, value: Any) -> str:
    return str(yaml.safe_dump({key: value}, default_flow_style=False, allow_unicode=True, sort_keys=False))


def merge_yaml_mapping(old: str | None, values: Mapping[str, Any]) -> str:
    """Set top-level keys of a YAML mapping file (aider's flat ``key: value`` config), keeping every other
    line — comments included, which a load-and-dump round trip would lose.

    Each key's existing top-level entry (its line and the indented or ``-`` lines under it) is replaced in
    place; missing keys are appended. The values are rendered by PyYAML. The result is loaded again and must
    equal the old mapping updated with ``values``; a layout this line edit cannot handle (a flow-style
    document, say) falls back to dumping the whole merged mapping, which keeps every key and value.
    """
    before = _load_yaml_mapping(old)
    expected = {**before, **values}
    lines = (old or "").splitlines(keepends=True)
    pending = dict(values)
    out: list[str] = []
    skipping = False
    for line in lines:
        if skipping:
            if not line.strip():
                out.append(line)  # a blank line is layout, not part of the value
                continue
            if line[:1] in (" ", "\t", "-"):
                continue
            skipping = False
        m = re.match(r"""^(?:"([^"]+)"|'([^']+)'|([^\s#'"][^:#]*?))\s*:(\s|$)""", line)
        key = m and (m.group(1) or m.group(2) or m.group(3))
        if key and key in values:
            skipping = True
            if key in pending:
                out.append(_yaml_line(key, pending.pop(key)))
            continue
        out.append(line)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    out.extend(_yaml_line(k, v) for k, v in pending.items())
    text = "".join(out)
    try:
        ok = _load_yaml_mapping(text) == expected
    except ParseError:
        ok = False
    if ok:
        return text
    return str(yaml.safe_dump(expected, default_flow_style=False, allow_unicode=True, sort_keys=False))
