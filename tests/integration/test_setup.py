"""``freellm setup <client>`` as a user runs it: the real command in a subprocess, against a temporary HOME
(``HOME`` and ``XDG_CONFIG_HOME`` set for it), with and without pre-existing client configs.

Every check that "nothing was touched" compares a digest of the whole temporary HOME tree — every path,
its type, mode and bytes — taken before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from freellm.setup import CLIENTS
from freellm.setup.apply import BACKUP_SUFFIX, MANIFEST_SUFFIX
from tests.harness import CLIENT_KEY, GatewayServer, unique

KEY = "sk-freellm-setup-test-0123456789abcd"
URL = "http://127.0.0.1:3999"

EXISTING: dict[str, dict[str, bytes]] = {
    # relative to HOME (opencode's: to XDG_CONFIG_HOME) → content with settings setup must keep
    "claude": {".claude/settings.json": b'{\n  "model": "opus",\n  "env": {"KEEP_ME": "1"},\n  "hooks": {}\n}\n'},
    "codex": {".codex/config.toml": b'# mine\napproval_policy = "never"\n\n[profiles.deep]\nmodel = "o3"\n'},
    "gemini": {".gemini/settings.json": b'{"ui": {"theme": "Dracula"}, "general": {"vimMode": true}}'},
    "opencode": {"opencode/opencode.json": b'{"theme": "nord", "provider": {"other": {"name": "Other"}}}\n'},
    "aider": {".aider.conf.yml": b"# my aider\ndark-mode: true\nmodel: gpt-4o\n"},
}
MALFORMED: dict[str, tuple[str, bytes]] = {
    "claude": (".claude/settings.json", b'{"env": {'),
    "codex": (".codex/config.toml", b"model = \n"),
    "gemini": (".gemini/settings.json", b"{theme: Dracula}"),
    "opencode": ("opencode/opencode.json", b'{"provider": {"a": 1},}'),
    "aider": (".aider.conf.yml", b"model: [gpt-4o\n"),
}


def tree_digest(root: Path) -> str:
    """Every path under ``root`` with its type, mode and content, hashed: any change shows."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)}\0{stat.S_IFMT(st.st_mode)}\0{stat.S_IMODE(st.st_mode):o}\0".encode())
            if stat.S_ISREG(st.st_mode):
                h.update(p.read_bytes())
    return h.hexdigest()


class Home:
    """A temporary HOME (and XDG_CONFIG_HOME under it) and ``freellm`` run with them."""

    def __init__(self, root: Path, xdg: bool = True) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.xdg = self.home / "xdg-config" if xdg else self.home / ".config"
        self.env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME",)}
        self.env["HOME"] = str(self.home)
        if xdg:
            self.env["XDG_CONFIG_HOME"] = str(self.xdg)

    def base(self, client: str) -> Path:
        return self.xdg if client == "opencode" else self.home

    def file(self, client: str, rel: str) -> Path:
        return self.base(client) / rel

    def put(self, client: str, rel: str, data: bytes, mode: int = 0o640) -> Path:
        p = self.file(client, rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
        return p

    def paths(self, client: str) -> list[Path]:
        from freellm.setup.merge import Locations

        loc = Locations(home=self.home, config_home=self.xdg)
        return [f.locate(loc) for f in CLIENTS[client].files]

    def digest(self) -> str:
        return tree_digest(self.home)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "freellm.cli", "setup", *args],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def setup(self, client: str, *extra: str) -> subprocess.CompletedProcess[str]:
        res = self.run(client, "--url", URL, "--key", KEY, *extra)
        assert res.returncode == 0, res.stderr
        return res


@pytest.fixture
def make_home(tmp_path: Path) -> Callable[..., Home]:
    count = iter(range(100))

    def factory(xdg: bool = True) -> Home:
        root = tmp_path / f"h{next(count)}"
        root.mkdir()
        return Home(root, xdg)

    return factory


def read_settings(client: str, path: Path) -> dict[str, object]:
    """A client file read the way that client reads it."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        doc: dict[str, object] = json.loads(text)
    elif path.suffix == ".toml":
        doc = tomllib.loads(text)
    elif path.suffix == ".yml":
        doc = yaml.safe_load(text)
    else:  # .env
        doc = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return doc


def assert_configured(client: str, home: Home, key: str = KEY, url: str = URL) -> None:
    files = {p.name: read_settings(client, p) for p in home.paths(client)}
    if client == "claude":
        env = files["settings.json"]["env"]
        assert isinstance(env, dict)
        assert env["ANTHROPIC_BASE_URL"] == url and env["ANTHROPIC_AUTH_TOKEN"] == key
        assert env["ANTHROPIC_MODEL"] == "auto"
    elif client == "codex":
        doc = files["config.toml"]
        assert doc["model_provider"] == "freellm" and doc["model"] == "auto"
        entry = doc["model_providers"]["freellm"]  # type: ignore[index]
        assert entry["wire_api"] == "responses" and entry["base_url"] == url + "/v1"
        assert entry["experimental_bearer_token"] == key
    elif client == "gemini":
        assert files["settings.json"]["security"] == {"auth": {"selectedType": "gemini-api-key"}}
        assert files[".env"] == {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": key}
    elif client == "opencode":
        entry = files["opencode.json"]["provider"]["freellm"]  # type: ignore[index]
        assert entry["npm"] == "@ai-sdk/openai-compatible"
        assert entry["options"] == {"baseURL": url + "/v1", "apiKey": key}
        assert files["opencode.json"]["model"] == "freellm/auto"
    else:
        doc = files[".aider.conf.yml"]
        assert doc["openai-api-base"] == url + "/v1" and doc["openai-api-key"] == key
        assert doc["model"] == "openai/auto"


CLIENT_NAMES = sorted(CLIENTS)


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_merge_backup_and_undo(client: str, make_home: Callable[..., Home]) -> None:
    home = make_home()
    (home.home / "unrelated.txt").write_text("not ours\n")
    originals = {home.put(client, rel, data): data for rel, data in EXISTING[client].items()}
    before = home.digest()

    res = home.setup(client)
    assert f"freellm setup {client} --undo" in res.stdout
    assert_configured(client, home)
    for path, data in originals.items():
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        assert backup.read_bytes() == data, "the backup is byte-identical to the original"
        assert stat.S_IMODE(backup.stat().st_mode) == 0o640
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, "an existing file keeps its mode"
    # the unrelated settings survive the merge
    if client == "claude":
        doc = json.loads(home.paths(client)[0].read_text())
        assert doc["model"] == "opus" and doc["env"]["KEEP_ME"] == "1" and doc["hooks"] == {}
    elif client == "codex":
        text = home.paths(client)[0].read_text()
        assert text.startswith("# mine\n") and tomllib.loads(text)["profiles"] == {"deep": {"model": "o3"}}
        assert tomllib.loads(text)["approval_policy"] == "never"
    elif client == "gemini":
        doc = json.loads(home.paths(client)[0].read_text())
        assert doc["ui"] == {"theme": "Dracula"} and doc["general"] == {"vimMode": True}
        env_file = home.paths(client)[1]
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600, "the secrets file is 0600"
    elif client == "opencode":
        doc = json.loads(home.paths(client)[0].read_text())
        assert doc["theme"] == "nord" and doc["provider"]["other"] == {"name": "Other"}
    else:
        text = home.paths(client)[0].read_text()
        assert text.startswith("# my aider\n") and yaml.safe_load(text)["dark-mode"] is True

    configured = home.digest()
    res = home.run(client, "--undo", "--print")
    assert res.returncode == 0 and "would " in res.stdout and home.digest() == configured

    res = home.run(client, "--undo")
    assert res.returncode == 0, res.stderr
    assert home.digest() == before, "undo restores every file byte for byte and removes what setup created"
    again = home.run(client, "--undo")
    assert again.returncode == 0 and "nothing to undo" in again.stdout


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_empty_home(client: str, make_home: Callable[..., Home]) -> None:
    """No config dirs at all (and, for opencode, no XDG_CONFIG_HOME: ``~/.config``): setup creates the files,
    new files holding the key are 0600, and undo leaves the HOME empty again."""
    home = make_home(xdg=False)
    home.setup(client)
    assert_configured(client, home)
    for path, spec in zip(home.paths(client), CLIENTS[client].files, strict=True):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if spec.holds_key or spec.secret else 0o644), path
        assert not path.with_name(path.name + BACKUP_SUFFIX).exists()
    assert home.run(client, "--undo").returncode == 0
    assert list(home.home.iterdir()) == []


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_print_writes_nothing_and_masks_the_key(client: str, make_home: Callable[..., Home]) -> None:
    home = make_home()
    for rel, data in EXISTING[client].items():
        home.put(client, rel, data)
    before = home.digest()
    res = home.setup(client, "--print")
    assert home.digest() == before
    assert KEY not in res.stdout and "…abcd" in res.stdout
    for path in home.paths(client):
        assert str(path) in res.stdout
    shown = home.setup(client, "--print", "--show-key")
    assert KEY in shown.stdout and home.digest() == before


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_malformed_file_stops_setup_touching_nothing(client: str, make_home: Callable[..., Home]) -> None:
    home = make_home()
    rel, data = MALFORMED[client]
    bad = home.put(client, rel, data)
    before = home.digest()
    res = home.run(client, "--url", URL, "--key", KEY)
    assert res.returncode == 2
    assert str(bad) in res.stderr and "cannot parse" in res.stderr
    assert "Traceback" not in res.stderr
    assert home.digest() == before


def test_no_partial_writes_when_a_later_file_is_bad(make_home: Callable[..., Home]) -> None:
    """Gemini's settings.json parses but its .env is not text: neither file (nor a backup) is written."""
    home = make_home()
    home.put("gemini", ".gemini/settings.json", b'{"ui": {"theme": "Dracula"}}')
    env = home.put("gemini", ".gemini/.env", b"GEMINI_API_KEY=\xff\xfe\n")
    before = home.digest()
    res = home.run("gemini", "--url", URL, "--key", KEY)
    assert res.returncode == 2 and str(env) in res.stderr
    assert home.digest() == before


def test_config_derives_url_and_key(make_home: Callable[..., Home]) -> None:
    home = make_home()
    cfg = home.root / "freellm.yaml"
    cfg.write_text(
        "server: {host: 0.0.0.0, port: 4567}\n"
        "auth:\n  api_keys: [{key: sk-from-config-0001}, sk-second]\n  admin_keys: [sk-admin-x]\n"
    )
    res = home.run("claude", "--config", str(cfg))
    assert res.returncode == 0, res.stderr
    assert_configured("claude", home, key="sk-from-config-0001", url="http://127.0.0.1:4567")

    ipv6 = home.root / "v6.yaml"
    ipv6.write_text("server: {host: '::1', port: 4568}\nauth: {api_keys: [sk-v6-key-000000]}\n")
    assert home.run("aider", "--config", str(ipv6)).returncode == 0
    assert yaml.safe_load((home.home / ".aider.conf.yml").read_text())["openai-api-base"] == "http://[::1]:4568/v1"

    keyless = home.root / "keyless.yaml"
    keyless.write_text("server: {port: 4569}\n")
    before = home.digest()
    res = home.run("codex", "--config", str(keyless))
    assert res.returncode == 2 and str(keyless) in res.stderr and "auth.api_keys" in res.stderr
    assert home.digest() == before


def test_bad_arguments(make_home: Callable[..., Home]) -> None:
    home = make_home()
    before = home.digest()
    for args in (["claude"], ["claude", "--url", URL], ["claude", "--url", "ftp://x", "--key", KEY]):
        res = home.run(*args)
        assert res.returncode == 2 and res.stderr.startswith("freellm: "), res.stderr
    assert home.run("claude", "--config", str(home.root / "missing.yaml")).returncode == 2
    assert home.digest() == before


def test_url_with_v1_is_the_root(make_home: Callable[..., Home]) -> None:
    home = make_home()
    res = home.run("claude", "--url", URL + "/v1/", "--key", KEY)
    assert res.returncode == 0, res.stderr
    assert_configured("claude", home)


def test_key_from_stdin(make_home: Callable[..., Home]) -> None:
    home = make_home()
    res = subprocess.run(
        [sys.executable, "-m", "freellm.cli", "setup", "aider", "--url", URL, "--key", "-"],
        input=KEY + "\n",
        env=home.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert_configured("aider", home)


def test_rerun_keeps_the_first_backup(make_home: Callable[..., Home]) -> None:
    """Setup twice (a new model the second time): undo still returns to the file from before the first run,
    and a second run that changes nothing writes nothing."""
    home = make_home()
    (path,) = home.paths("claude")
    original = EXISTING["claude"][".claude/settings.json"]
    home.put("claude", ".claude/settings.json", original)
    before = home.digest()
    home.setup("claude")
    home.setup("claude", "--model", "groq/llama-3.3-70b")
    assert json.loads(path.read_text())["env"]["ANTHROPIC_MODEL"] == "groq/llama-3.3-70b"
    mid = home.digest()
    res = home.setup("claude", "--model", "groq/llama-3.3-70b")
    assert "nothing changed" in res.stdout and home.digest() == mid
    assert home.run("claude", "--undo").returncode == 0
    assert path.read_bytes() == original and home.digest() == before


def test_a_stray_backup_is_never_overwritten(make_home: Callable[..., Home]) -> None:
    home = make_home()
    home.put("aider", ".aider.conf.yml", b"model: a\n")
    home.put("aider", ".aider.conf.yml" + BACKUP_SUFFIX, b"model: the-real-original\n")
    before = home.digest()
    res = home.run("aider", "--url", URL, "--key", KEY)
    assert res.returncode == 2 and BACKUP_SUFFIX in res.stderr
    assert home.digest() == before


def test_undo_refuses_when_a_backup_is_gone(make_home: Callable[..., Home]) -> None:
    home = make_home()
    home.put("codex", ".codex/config.toml", b'model = "o3"\n')
    home.setup("codex")
    (path,) = home.paths("codex")
    path.with_name(path.name + BACKUP_SUFFIX).unlink()
    before = home.digest()
    res = home.run("codex", "--undo")
    assert res.returncode == 2 and "missing" in res.stderr
    assert home.digest() == before
    assert path.with_name(path.name + MANIFEST_SUFFIX).exists()


def test_symlinked_config_is_edited_in_place(make_home: Callable[..., Home]) -> None:
    """A config kept in a dotfiles repository and linked into HOME stays a link; the real file is edited."""
    home = make_home()
    real = home.home / "dotfiles" / "aider.yml"
    real.parent.mkdir()
    real.write_bytes(b"dark-mode: true\n")
    link = home.home / ".aider.conf.yml"
    link.symlink_to(real)
    before = home.digest()
    home.setup("aider")
    assert link.is_symlink() and yaml.safe_load(real.read_text())["openai-api-key"] == KEY
    assert home.run("aider", "--undo").returncode == 0
    assert home.digest() == before


def test_opencode_lists_the_gateways_models(
    make_home: Callable[..., Home], make_gateway: Callable[..., GatewayServer]
) -> None:
    name = unique("setup-oc")
    gw = make_gateway({name: ["model-a", "model-b"]})
    home = make_home()
    res = home.run("opencode", "--url", gw.base_url, "--key", CLIENT_KEY)
    assert res.returncode == 0, res.stderr
    doc = json.loads(home.paths("opencode")[0].read_text())
    models = doc["provider"]["freellm"]["models"]
    assert {"auto", "model-a", "model-b"} <= set(models)
    assert next(iter(models)) == "auto"


def test_opencode_without_a_gateway_lists_auto(make_home: Callable[..., Home]) -> None:
    home = make_home()
    res = home.run("opencode", "--url", "http://127.0.0.1:9", "--key", KEY)
    assert res.returncode == 0, res.stderr
    assert "did not answer" in res.stderr
    models = json.loads(home.paths("opencode")[0].read_text())["provider"]["freellm"]["models"]
    assert list(models) == ["auto"]
