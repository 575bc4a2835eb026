"""The real clients — Claude Code, Codex CLI, Gemini CLI, opencode, aider — complete a turn through a real
gateway using only what ``freellm setup`` wrote.

The clients are installed from npm and PyPI (pinned to the versions these tests were checked with) into
a cache outside the repository, ``~/.cache/freellm-clients`` (``FREELLM_CLIENTS_CACHE`` overrides it), and
reused while the versions match. A cold install takes about 2 minutes here (npm ~40 s, then aider's
venv ~85 s; ~1.5 minutes with warm npm/pip caches), and the five turns ~25 s, so these tests run with the
default suite; ``python -m pytest -m clients`` runs only them.

Each client runs non-interactively with an environment built from scratch — ``PATH``, ``HOME`` (an empty
temporary one, then what setup wrote), ``TERM``, ``LANG`` — so no gateway URL or key can reach it except
through its config files. The simulator behind the gateway answers with a text unique to the test; the
test checks that the simulator received the request and that the client printed that text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, unique

pytestmark = pytest.mark.clients

CACHE: Final = Path(os.environ.get("FREELLM_CLIENTS_CACHE") or Path.home() / ".cache" / "freellm-clients")
NPM_PACKAGES: Final = {
    "claude": ("@anthropic-ai/claude-code", "2.1.197"),
    "codex": ("@openai/codex", "0.171.0"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "opencode": ("opencode-ai", "1.18.33"),
}
AIDER_VERSION: Final = "0.86.2"
INSTALL_TIMEOUT_S: Final = 900
TURN_TIMEOUT_S: Final = 180


def _installed_version(package_json: Path) -> str | None:
    try:
        version = json.loads(package_json.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None
    return str(version)


def _install_npm_clients() -> dict[str, Path]:
    prefix = CACHE / "npm"
    stale = [
        f"{pkg}@{ver}"
        for pkg, ver in NPM_PACKAGES.values()
        if _installed_version(prefix / "node_modules" / pkg / "package.json") != ver
    ]
    if stale:
        prefix.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--save-exact", *stale],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        assert res.returncode == 0, f"npm install {stale} failed:\n{res.stdout}\n{res.stderr}"
    bins = {name: prefix / "node_modules" / ".bin" / name for name in NPM_PACKAGES}
    for name, path in bins.items():
        assert path.exists(), f"{NPM_PACKAGES[name][0]} installed no {name} binary at {path}"
    return bins


def _install_aider() -> Path:
    venv = CACHE / "aider-venv"
    python = venv / "bin" / "python"
    aider = venv / "bin" / "aider"
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('aider-chat'))"],
        capture_output=True,
        text=True,
        check=False,
    ) if python.exists() else None
    if probe is None or probe.returncode != 0 or probe.stdout.strip() != AIDER_VERSION:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        res = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"aider-chat=={AIDER_VERSION}"],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        assert res.returncode == 0, f"pip install aider-chat failed:\n{res.stdout}\n{res.stderr}"
    assert aider.exists(), f"aider-chat installed no aider at {aider}"
    return aider


@pytest.fixture(scope="session")
def client_bins() -> dict[str, Path]:
    """Every client's executable, installed into the cache when missing or of another version."""
    return {**_install_npm_clients(), "aider": _install_aider()}


def _clean_env(home: Path) -> dict[str, str]:
    """Only what a shell needs: nothing that names the gateway or a key."""
    node = shutil.which("node")
    assert node, "Node.js is needed for the npm clients"
    path = os.pathsep.join(dict.fromkeys([os.path.dirname(node), "/usr/local/bin", "/usr/bin", "/bin"]))
    return {"PATH": path, "HOME": str(home), "TERM": "dumb", "LANG": "C.UTF-8", "NO_COLOR": "1"}


def _command(client: str, binary: Path, prompt: str) -> list[str]:
    if client == "claude":
        return [str(binary), "-p", prompt]
    if client == "codex":
        return [str(binary), "exec", "--skip-git-repo-check", prompt]
    if client == "gemini":
        return [str(binary), "-p", prompt]
    if client == "opencode":
        return [str(binary), "run", prompt]
    return [str(binary), "--message", prompt, "--yes-always", "--no-git", "--no-check-update"]


@pytest.mark.parametrize("client", ["claude", "codex", "gemini", "opencode", "aider"])
def test_real_client_completes_a_turn(
    client: str,
    client_bins: dict[str, Path],
    make_gateway: Callable[..., GatewayServer],
    sim_control: SimControl,
    tmp_path: Path,
) -> None:
    provider = unique(f"real-{client}")
    answer = f"Simulated hello {uuid.uuid4().hex[:8]}."
    gw = make_gateway({provider: ["sim-model"]})
    sim_control.set_default({"text": answer}, provider=provider)
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    if client == "gemini":
        # Gemini CLI's model router asks for a JSON complexity score first; a plain-text reply would be
        # failed over as not JSON, and the CLI would retry it with backoff before falling back.
        sim_control.script(
            provider,
            {"text": '{"complexity_reasoning": "A greeting.", "complexity_score": 5}'},
            match="Task Routing AI",
            times=None,
        )
        # The user's own answer to Gemini CLI's folder-trust prompt for this project: it reads
        # ~/.gemini/.env only in a trusted folder (docs/clients/gemini.md).
        (home / ".gemini").mkdir()
        (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))

    env = _clean_env(home)
    setup = subprocess.run(
        [sys.executable, "-m", "freellm.cli", "setup", client, "--url", gw.base_url, "--key", CLIENT_KEY],
        env={**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert setup.returncode == 0, setup.stderr

    run = subprocess.run(
        _command(client, client_bins[client], "say hi"),
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TURN_TIMEOUT_S,
        check=False,
    )
    output = run.stdout + run.stderr
    received = sim_control.requests(provider)
    assert received, f"{client} never reached the simulator (exit {run.returncode}):\n{output[-4000:]}"
    assert all(r["model"] == "sim-model" for r in received)
    assert answer in run.stdout, f"{client} did not print the simulator's answer (exit {run.returncode}):\n{output[-4000:]}"
    assert run.returncode == 0, output[-4000:]
