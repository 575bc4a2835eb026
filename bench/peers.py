"""Installing the peers the benchmark compares against, each in its own place under bench/ (gitignored).

* LiteLLM proxy: ``litellm[proxy]`` in its own virtual environment, ``bench/.venvs/litellm`` (it pins
  its own versions of aiohttp, pydantic, … which must not touch freellm's environment).
* Portkey's gateway: ``@portkey-ai/gateway`` from npm in ``bench/.node``. Its 1.15.x releases fail to
  stream through the Node adapter (Portkey-AI/gateway#1389); 1.9.8 streams correctly once its
  ``@hono/node-server`` dependency is held at 1.13.8 (1.14 and later show the same failure: every
  streamed request answers ``{"status":"failure","message":"Something went wrong"}``). The failure
  follows ``@hono/node-server``: 1.15.2 with the same pin streams too (``--portkey-version 1.15.2``).

Both installs are idempotent: a marker file records what was installed, and a second run reuses it.
An install that cannot be done here raises :class:`Unavailable` with the reason for the table.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
LITELLM_VENV = BENCH_DIR / ".venvs" / "litellm"
NODE_DIR = BENCH_DIR / ".node"

LITELLM_SPEC = "litellm[proxy]==1.108.7"
PORTKEY_VERSION = "1.9.8"
HONO_NODE_SERVER_VERSION = "1.13.8"


class Unavailable(Exception):
    """A peer cannot be installed or run on this machine; the message says why."""


def _run(argv: list[str], log: Path, timeout: float) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(argv) + "\n").encode())
        f.flush()
        try:
            proc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise Unavailable(
                f"`{' '.join(argv[:3])} …` timed out after {timeout:.0f} s (log: {log})"
            ) from exc
        except OSError as exc:
            raise Unavailable(f"cannot run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise Unavailable(
            f"`{' '.join(argv[:4])} …` failed ({proc.returncode}): {tail[0][:200]} (log: {log})"
        )


def litellm_python() -> Path:
    return LITELLM_VENV / "bin" / "python"


def ensure_litellm(log: Path, spec: str = LITELLM_SPEC, install: bool = True) -> str:
    """Install LiteLLM proxy into its own venv if needed; returns its version."""
    marker = LITELLM_VENV / ".bench-installed"
    if not (
        marker.exists() and marker.read_text().strip() == spec and (LITELLM_VENV / "bin" / "litellm").exists()
    ):
        if not install:
            raise Unavailable(f"not installed in {LITELLM_VENV} (run without --no-install)")
        started = time.monotonic()
        print(f"  installing {spec} into {LITELLM_VENV} (first run only; ~1 min) …", flush=True)
        base = getattr(sys, "_base_executable", None) or sys.executable
        if not (LITELLM_VENV / "bin" / "python").exists():
            _run([base, "-m", "venv", str(LITELLM_VENV)], log, 300)
        _run(
            [str(litellm_python()), "-m", "pip", "install", "-q", "--disable-pip-version-check", spec],
            log,
            1800,
        )
        marker.write_text(spec + "\n")
        print(f"  installed LiteLLM in {time.monotonic() - started:.0f} s", flush=True)
    out = subprocess.run(
        [str(litellm_python()), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise Unavailable(f"litellm does not import in {LITELLM_VENV}: {out.stderr.strip()[-200:]}")
    return out.stdout.strip()


def portkey_entry() -> Path:
    return NODE_DIR / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"


def ensure_portkey(log: Path, install: bool = True, version: str = PORTKEY_VERSION) -> str:
    """Install Portkey's gateway (pinned, see the module doc) into bench/.node; returns a version string."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if not node or not npm:
        raise Unavailable("node/npm not found (install Node.js and npm to include Portkey)")
    package = {
        "name": "freellm-bench-peers",
        "private": True,
        "description": "installed by freellm's benchmark (python -m bench run); not part of the project",
        "dependencies": {
            "@portkey-ai/gateway": version,
            "@hono/node-server": HONO_NODE_SERVER_VERSION,
        },
        "overrides": {"@hono/node-server": HONO_NODE_SERVER_VERSION},
    }
    wanted = json.dumps(package, indent=2) + "\n"
    pkg_path = NODE_DIR / "package.json"
    marker = NODE_DIR / ".bench-installed"
    if not (marker.exists() and marker.read_text() == wanted and portkey_entry().exists()):
        if not install:
            raise Unavailable(f"not installed in {NODE_DIR} (run without --no-install)")
        print(f"  installing @portkey-ai/gateway@{version} into {NODE_DIR} …", flush=True)
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        pkg_path.write_text(wanted)
        _run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR)], log, 600)
        marker.write_text(wanted)
    versions = {}
    for name in ("@portkey-ai/gateway", "@hono/node-server"):
        meta = NODE_DIR / "node_modules" / name / "package.json"
        try:
            versions[name] = json.loads(meta.read_text())["version"]
        except (OSError, ValueError, KeyError) as exc:
            raise Unavailable(f"{name} missing from {NODE_DIR}: {exc}") from exc
    node_version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"{versions['@portkey-ai/gateway']} (@hono/node-server {versions['@hono/node-server']}, node {node_version})"
