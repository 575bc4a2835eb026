"""opencode: a ``freellm`` provider in ``$XDG_CONFIG_HOME/opencode/opencode.json``.

opencode talks to any OpenAI-compatible server through the ``@ai-sdk/openai-compatible`` package; a
provider entry names the package, the base URL and key (``options``) and the models it offers. The
gateway's models come from its ``GET /v1/models`` when it answers at setup time; ``auto`` (the configured
chain) is always among them. The top-level ``model`` (``provider/model``) makes it the default.
"""

from __future__ import annotations

from typing import Any

from freellm.setup.merge import Client, ClientFile, ParseError, Target, dump_json, load_json_object, set_in

__all__ = ["CLIENT", "PROVIDER_ID", "SCHEMA_URL", "render_config"]

PROVIDER_ID = "freellm"
SCHEMA_URL = "https://opencode.ai/config.json"


def render_config(old: str | None, target: Target) -> str:
    """``opencode.json`` with ``provider.freellm`` (package, name, ``options.baseURL``/``apiKey``, models)
    and ``model: "freellm/<model>"``. Keys the user added to our provider entry (say ``options.headers``)
    and every other provider and setting are kept; our ``models`` list is replaced by the gateway's."""
    doc = load_json_object(old)
    if not doc:
        doc["$schema"] = SCHEMA_URL
    providers = doc.get("provider")
    if providers is not None and not isinstance(providers, dict):
        raise ParseError(f"`provider` is a {type(providers).__name__}, expected an object")
    entry = (providers or {}).get(PROVIDER_ID)
    if entry is not None and not isinstance(entry, dict):
        raise ParseError(f"`provider.{PROVIDER_ID}` is a {type(entry).__name__}, expected an object")
    model = target.model_or_default
    ids = list(dict.fromkeys([model, *target.models])) if target.models else list(dict.fromkeys([model, "auto"]))
    models: dict[str, Any] = {mid: {"name": mid} for mid in ids}
    base = ["provider", PROVIDER_ID]
    set_in(doc, [*base, "npm"], "@ai-sdk/openai-compatible")
    set_in(doc, [*base, "name"], "freellm")
    set_in(doc, [*base, "options", "baseURL"], target.v1)
    set_in(doc, [*base, "options", "apiKey"], target.key)
    set_in(doc, [*base, "models"], models)
    doc["model"] = f"{PROVIDER_ID}/{model}"
    return dump_json(doc, old)


CLIENT = Client(
    name="opencode",
    title="opencode",
    files=(
        ClientFile(
            label="$XDG_CONFIG_HOME/opencode/opencode.json",
            locate=lambda loc: loc.config_home / "opencode" / "opencode.json",
            render=render_config,
            holds_key=True,
        ),
    ),
    run_hint='opencode run "say hi"',
    lists_models=True,
)
