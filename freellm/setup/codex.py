"""Codex CLI: a ``freellm`` entry under ``model_providers`` and the default ``model_provider``/``model`` in
``~/.codex/config.toml``.

Codex speaks the Responses API (``wire_api = "responses"``) to ``<base_url>/responses``, so ``base_url`` is
the gateway's ``/v1``. The key is written as the entry's ``experimental_bearer_token`` so that Codex works
from the file alone, with nothing to export (``env_key`` would name a variable that must be set in every
shell). The file is edited with tomlkit, which keeps the user's comments, order and formatting; it is read
with tomllib first so a broken file is reported the way TOML parsers agree on.
"""

from __future__ import annotations

import tomllib
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.items import InlineTable, Table

from freellm.setup.merge import Client, ClientFile, ParseError, Target

__all__ = ["CLIENT", "PROVIDER_ID", "render_config"]

PROVIDER_ID = "freellm"


def _table(container: Any, key: str, where: str) -> Any:
    """``container[key]`` as a table, created when missing; anything else there stops setup."""
    if key not in container:
        container.add(key, tomlkit.table(is_super_table=(key == "model_providers")))
        return container[key]
    value = container[key]
    if not isinstance(value, Table | InlineTable):
        raise ParseError(f"`{where}` is a {type(value).__name__}, expected a table")
    return value


def render_config(old: str | None, target: Target) -> str:
    """``config.toml`` with ``model``, ``model_provider = "freellm"`` and ``[model_providers.freellm]``
    (``name``, ``base_url``, ``wire_api``, ``experimental_bearer_token``). Keys the user added to that entry
    are kept except ``env_key``, which Codex would prefer over the token; everything else in the file — other
    providers, profiles, MCP servers, comments — is kept as written."""
    text = old or ""
    try:
        tomllib.loads(text)
        doc = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise ParseError(f"not valid TOML: {exc}") from None
    model = target.model_or_default
    doc["model"] = model
    doc["model_provider"] = PROVIDER_ID
    providers = _table(doc, "model_providers", "model_providers")
    entry = _table(providers, PROVIDER_ID, f"model_providers.{PROVIDER_ID}")
    entry["name"] = "freellm"
    entry["base_url"] = target.v1
    entry["wire_api"] = "responses"
    entry["experimental_bearer_token"] = target.key
    if "env_key" in entry:
        del entry["env_key"]
    new = tomlkit.dumps(doc)
    _check(new, target, model)
    return new


def _check(new: str, target: Target, model: str) -> None:
    """Read the result back with tomllib: a layout tomlkit edited wrongly must never reach Codex."""
    data = tomllib.loads(new)
    entry = data.get("model_providers", {}).get(PROVIDER_ID, {})
    if (
        data.get("model") != model
        or data.get("model_provider") != PROVIDER_ID
        or entry.get("base_url") != target.v1
        or entry.get("experimental_bearer_token") != target.key
    ):  # pragma: no cover - a tomlkit bug, not an input we know
        raise ParseError("the merged file does not read back as written (please report this layout)")


CLIENT = Client(
    name="codex",
    title="Codex CLI",
    files=(
        ClientFile(
            label="~/.codex/config.toml",
            locate=lambda loc: loc.home / ".codex" / "config.toml",
            render=render_config,
            holds_key=True,
        ),
    ),
    run_hint='codex exec --skip-git-repo-check "say hi"',
)
