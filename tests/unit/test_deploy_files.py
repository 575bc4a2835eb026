"""The deployment files in deploy/ stay true to the code: the example config loads (with its secrets
from the environment), the compose file wires what docs/deployment.md describes, and the unit runs a
command the CLI has."""

from __future__ import annotations

from pathlib import Path

import yaml

from freellm.cli import build_parser
from freellm.config import load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ENV = {
    "FREELLM_API_KEY": "sk-client-example",
    "FREELLM_ADMIN_KEY": "sk-admin-example",
    "POSTGRES_PASSWORD": "pw-example",
    "GROQ_API_KEY": "gsk-example",
    "GEMINI_API_KEY": "gm-example",
}


def test_the_example_config_loads_and_shares_both_stores() -> None:
    settings = load_settings(DEPLOY / "freellm.yaml", env=ENV)
    storage = settings.storage
    assert storage.redis_url == "redis://redis:6379/0"
    assert storage.postgres_url == "postgresql://freellm:pw-example@postgres:5432/freellm"
    assert storage.namespace == "freellm"
    assert [str(r) for r in settings.chain] == ["gemini/gemini-2.5-flash", "groq/llama-3.3-70b-versatile"]
    assert settings.auth.admin_keys == ["sk-admin-example"]


def test_compose_runs_replicas_behind_a_balancer_with_redis_and_postgres() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"freellm", "lb", "redis", "postgres"}
    assert services["freellm"]["build"]["dockerfile"] == "deploy/Dockerfile"
    assert set(services["freellm"]["depends_on"]) == {"redis", "postgres"}
    assert "./freellm.yaml:/etc/freellm/freellm.yaml:ro" in services["freellm"]["volumes"]
    assert (DEPLOY / "haproxy.cfg").read_text().count("/health") == 1
    env_names = {line.split("=")[0] for line in (DEPLOY / "env.example").read_text().splitlines() if "=" in line and not line.startswith("#")}
    assert set(ENV) | {"FREELLM_MASTER_KEY"} <= env_names


def test_the_systemd_unit_runs_a_real_serve_command() -> None:
    unit = (DEPLOY / "freellm@.service").read_text()
    [exec_start] = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith("ExecStart=")]
    argv = exec_start.split()[1:]
    args = build_parser().parse_args([a.replace("%i", "3001") for a in argv])
    assert args.command == "serve" and args.port == 3001 and args.config == "/etc/freellm/freellm.yaml"
