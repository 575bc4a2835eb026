"""Claude Code: the ``env`` block of ``~/.claude/settings.json``.

Claude Code applies that block to its own environment on every start (over the shell's values), so the
gateway is used without exporting anything. The base URL is the gateway's root (Claude Code appends
``/v1/messages``); the key goes in ``ANTHROPIC_AUTH_TOKEN``, sent as ``Authorization: Bearer`` — unlike
``ANTHROPIC_API_KEY`` it needs no interactive approval.
"""

from __future__ import annotations

from freellm.setup.merge import Client, ClientFile, ParseError, Target, dump_json, load_json_object, set_in

__all__ = ["CLIENT", "render_settings"]


def render_settings(old: str | None, target: Target) -> str:
    """``settings.json`` with ``env.ANTHROPIC_BASE_URL``, ``env.ANTHROPIC_AUTH_TOKEN`` and
    ``env.ANTHROPIC_MODEL`` set; every other key and variable kept. An ``ANTHROPIC_API_KEY`` already in the
    block is dropped: Claude Code would send it too (as ``x-api-key``), and it is not the gateway's key."""
    doc = load_json_object(old)
    env = doc.get("env")
    if env is not None and not isinstance(env, dict):
        raise ParseError(f"`env` is a {type(env).__name__}, expected an object")
    set_in(doc, ["env", "ANTHROPIC_BASE_URL"], target.base_url)
    set_in(doc, ["env", "ANTHROPIC_AUTH_TOKEN"], target.key)
    set_in(doc, ["env", "ANTHROPIC_MODEL"], target.model_or_default)
    doc["env"].pop("ANTHROPIC_API_KEY", None)
    return dump_json(doc, old)


CLIENT = Client(
    name="claude",
    title="Claude Code",
    files=(
        ClientFile(
            label="~/.claude/settings.json",
            locate=lambda loc: loc.home / ".claude" / "settings.json",
            render=render_settings,
            holds_key=True,
        ),
    ),
    run_hint='claude -p "say hi"',
)
