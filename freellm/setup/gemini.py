"""Gemini CLI: ``~/.gemini/settings.json`` (the auth type) and ``~/.gemini/.env`` (URL and key).

Gemini CLI reads ``~/.gemini/.env`` at start-up when no project ``.env`` is found on the way up from the
working directory, and its Gemini-API-key auth honours ``GOOGLE_GEMINI_BASE_URL``. With
``security.auth.selectedType: "gemini-api-key"`` it skips the auth prompt and uses ``GEMINI_API_KEY``.
"""

from __future__ import annotations

from freellm.setup.merge import (
    Client,
    ClientFile,
    Target,
    dump_json,
    load_json_object,
    merge_dotenv,
    set_in,
)

__all__ = ["AUTH_TYPE", "CLIENT", "render_env", "render_settings"]

AUTH_TYPE = "gemini-api-key"


def render_settings(old: str | None, target: Target) -> str:
    """``settings.json`` with ``security.auth.selectedType`` set to the API-key auth (and ``model.name``
    when ``--model`` was given: otherwise Gemini CLI keeps asking for its own model names, which the
    gateway's model map routes); every other setting kept."""
    doc = load_json_object(old)
    set_in(doc, ["security", "auth", "selectedType"], AUTH_TYPE)
    if target.model:
        set_in(doc, ["model", "name"], target.model)
    return dump_json(doc, old)


def render_env(old: str | None, target: Target) -> str:
    """``.env`` with ``GOOGLE_GEMINI_BASE_URL`` (the gateway's root: the CLI adds ``/v1beta``) and
    ``GEMINI_API_KEY``; other lines kept."""
    return merge_dotenv(old, {"GOOGLE_GEMINI_BASE_URL": target.base_url, "GEMINI_API_KEY": target.key})


CLIENT = Client(
    name="gemini",
    title="Gemini CLI",
    files=(
        ClientFile(
            label="~/.gemini/settings.json",
            locate=lambda loc: loc.home / ".gemini" / "settings.json",
            render=render_settings,
            holds_key=False,
        ),
        ClientFile(
            label="~/.gemini/.env",
            locate=lambda loc: loc.home / ".gemini" / ".env",
            render=render_env,
            holds_key=True,
            secret=True,
        ),
    ),
    run_hint='gemini -p "say hi"',
)
