"""aider: ``~/.aider.conf.yml``.

aider reaches OpenAI-compatible servers through LiteLLM: ``openai-api-base`` is the gateway's ``/v1``,
``openai-api-key`` the client key, and a model named ``openai/<id>`` is sent to that base as ``<id>`` —
``openai/auto`` asks the gateway for its configured chain.
"""

from __future__ import annotations

from freellm.setup.merge import Client, ClientFile, Target, merge_yaml_mapping

__all__ = ["CLIENT", "render_config"]


def render_config(old: str | None, target: Target) -> str:
    """``.aider.conf.yml`` with ``openai-api-base``, ``openai-api-key`` and ``model``; every other line of the
    file (comments too) kept."""
    model = target.model_or_default
    return merge_yaml_mapping(
        old,
        {
            "openai-api-base": target.v1,
            "openai-api-key": target.key,
            "model": model if model.startswith("openai/") else f"openai/{model}",
        },
    )


CLIENT = Client(
    name="aider",
    title="aider",
    files=(
        ClientFile(
            label="~/.aider.conf.yml",
            locate=lambda loc: loc.home / ".aider.conf.yml",
            render=render_config,
            holds_key=True,
        ),
    ),
    run_hint='aider --message "say hi" --yes-always --no-git',
)
