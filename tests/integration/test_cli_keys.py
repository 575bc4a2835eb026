"""``freellm keys add|list|remove|test`` and ``freellm status`` as operators run them: the real CLI as a
subprocess against a real ``freellm serve`` subprocess whose providers are the session simulator.

Both ways of acting are covered: ``--config`` (on the data directory; the running gateway picks the
change up within 5 s, polled against that deadline) and ``--url`` (through the admin API; the change
serves the very next request). The key under test is grepped for in everything the CLI printed and in
every file of the data directory: it must appear nowhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
import pytest

from freellm.admin.watch import WATCH_INTERVAL_S
from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import unique
from tests.integration.test_cli import Proc, clean_env, free_port, spawn

__all__ = ["spawn"]  # the fixture, imported for this module's tests

ADMIN_KEY = "sk-admin-cli-keys"
CLIENT_KEY = "sk-client-cli-keys"
MODEL = "model-x"
PICK_UP_S = 5.0
"""What docs/cli.md promises for a change made with ``--config`` while the gateway runs."""
CLI_TIMEOUT_S = 60.0


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def both(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Setup:
    """A config file, its gateway (running), and the providers it names."""

    tmp: Path
    config: Path
    gateway: Proc
    empty: str
    """A provider configured with ``keys: []``: it serves only once a key is added."""
    keyed: str
    """A provider with one key from the environment (``source: config``)."""
    outputs: list[str]
    """Everything every CLI run printed, for the no-secret check."""

    @property
    def data_dir(self) -> Path:
        return self.tmp / "data"

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(self.tmp, KEYED_KEY="sk-from-env-0001", **extra)

    def cli(self, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Ran:
        """Run ``freellm`` with piped stdout/stderr (so: no colour, no spinner)."""
        done = subprocess.run(
            [sys.executable, "-m", "freellm.cli", *args],
            env=env if env is not None else self.env(),
            cwd=self.tmp,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        ran = Ran(done.returncode, done.stdout, done.stderr)
        self.outputs.append(ran.both)
        assert "Traceback" not in ran.stderr, ran.stderr
        return ran

    def local(self, *args: str) -> Ran:
        return self.cli(*args, "--config", str(self.config))

    def remote(self, *args: str) -> Ran:
        return self.cli(*args, "--url", self.gateway.base_url, "--admin-key", ADMIN_KEY)

    def chat(self, model: str = "auto") -> httpx.Response:
        return httpx.post(
            f"{self.gateway.base_url}/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {CLIENT_KEY}"},
            timeout=15,
        )

    def served_by(self, provider: str) -> bool:
        resp = self.chat(f"{provider}/{MODEL}")
        return resp.status_code == 200 and resp.headers.get("x-routed-via") == f"{provider}/{MODEL}"

    def keys(self, provider: str) -> list[dict[str, Any]]:
        ran = self.remote("keys", "list", provider, "--json")
        assert ran.code == 0, ran.stderr
        return list(orjson.loads(ran.stdout))


CONFIG = """\
    server: {{host: 127.0.0.1, port: {port}, ip_rate_limit_rpm: 0}}
    auth: {{api_keys: ["{client}"], admin_keys: ["{admin}"]}}
    storage: {{path: ./data}}
    health: {{key_check_s: 0, cooldown_probe_s: 0}}
    fallback: {{cooldown_local_s: 600}}  # the status test reads a cooldown back: it must outlive a slow machine
    providers:
      - name: {empty}
        kind: openai
        base_url: {sim}/{empty}/v1
        keys: []
        models: [{{id: {model}}}]
      - name: {keyed}
        kind: openai
        base_url: {sim}/{keyed}/v1
        keys: ["${{KEYED_KEY}}"]
        models: [{{id: {model}}}]
    chain: ["{keyed}/{model}", "{empty}/{model}"]
"""


@pytest.fixture
def setup(spawn: Callable[..., Proc], sim: SimServer, tmp_path: Path) -> Setup:
    port = free_port()
    empty, keyed = unique("empty"), unique("keyed")
    config = tmp_path / "freellm.yaml"
    text = CONFIG.format(
        port=port, client=CLIENT_KEY, admin=ADMIN_KEY, sim=sim.base_url, empty=empty, keyed=keyed, model=MODEL
    )
    config.write_text(textwrap.dedent(text), encoding="utf-8")
    env = clean_env(tmp_path, KEYED_KEY="sk-from-env-0001")
    gateway = spawn(["serve", "--config", str(config)], env=env, port=port)
    gateway.wait_ready()
    return Setup(tmp_path, config, gateway, empty, keyed, [])


def within(deadline_s: float, check: Callable[[], bool], what: str) -> float:
    """Seconds until ``check()`` held; fails past ``deadline_s``."""
    start = time.monotonic()
    while not check():
        elapsed = time.monotonic() - start
        assert elapsed < deadline_s, f"{what}: not within {deadline_s} s"
        time.sleep(WATCH_INTERVAL_S / 4)  # a polling step bounded by the deadline, not a wait for an event
    return time.monotonic() - start


def assert_secret_nowhere(setup: Setup, secret: str) -> None:
    """Not in anything the CLI printed, not in any file of the data directory (database, WAL…)."""
    for output in setup.outputs:
        assert secret not in output
        assert secret[:-4] not in output  # not even the part a mask would hide
    setup.outputs.append(setup.gateway.stdout() + setup.gateway.stderr())
    assert secret not in setup.outputs[-1]
    files = [p for p in setup.data_dir.rglob("*") if p.is_file()]
    assert files, "the data directory is empty"
    for path in files:
        assert secret.encode() not in path.read_bytes(), path


# ---- the CLI's keys serve requests --------------------------------------------------------------------------


def test_a_key_added_with_config_is_served_by_the_running_gateway_within_5s(
    setup: Setup, sim_control: SimControl
) -> None:
    secret = f"sk-cli-local-{unique('s')}-AbCd"
    assert setup.chat(f"{setup.empty}/{MODEL}").status_code == 503  # no key yet
    ran = setup.local("keys", "add", setup.empty, secret)
    assert ran.code == 0, ran.stderr
    assert "…AbCd" in ran.stdout and "within 5 s" in ran.stdout
    took = within(PICK_UP_S, lambda: setup.served_by(setup.empty), "the gateway serving the CLI's key")
    assert took < PICK_UP_S
    sent = sim_control.requests(setup.empty)
    assert sent and sent[-1]["key"] == secret  # the upstream got the real key
    [key] = setup.keys(setup.empty)
    assert key["masked"] == "…AbCd" and key["source"] == "runtime" and key["enabled"] is True
    assert_secret_nowhere(setup, secret)


def test_a_key_added_with_url_serves_the_next_request(setup: Setup, sim_control: SimControl) -> None:
    secret = f"sk-cli-remote-{unique('s')}-WxYz"
    assert setup.chat(f"{setup.empty}/{MODEL}").status_code == 503
    ran = setup.remote("keys", "add", setup.empty, secret)
    assert ran.code == 0, ran.stderr
    assert "…WxYz" in ran.stdout and "next request" in ran.stdout
    assert setup.served_by(setup.empty)  # no waiting: the admin API applied it
    assert sim_control.requests(setup.empty)[-1]["key"] == secret
    assert_secret_nowhere(setup, secret)


def test_url_and_admin_key_come_from_the_environment_and_stdin_carries_the_key(
    setup: Setup, sim_control: SimControl
) -> None:
    secret = f"sk-cli-stdin-{unique('s')}-QrSt"
    env = setup.env(FREELLM_URL=setup.gateway.base_url, FREELLM_ADMIN_KEY=ADMIN_KEY)
    ran = setup.cli("keys", "add", setup.empty, "-", env=env, stdin=secret + "\n")
    assert ran.code == 0, ran.stderr
    assert setup.served_by(setup.empty)
    assert sim_control.requests(setup.empty)[-1]["key"] == secret
    listed = setup.cli("keys", "list", env=env)
    assert listed.code == 0 and "…QrSt" in listed.stdout
    assert_secret_nowhere(setup, secret)


# ---- list, test, remove in both modes ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["config", "url"])
def test_list_test_and_remove(setup: Setup, sim_control: SimControl, mode: str) -> None:
    run = setup.local if mode == "config" else setup.remote
    secret = f"sk-cli-{mode}-{unique('s')}-LmNo"
    assert run("keys", "add", setup.empty, secret).code == 0

    listed = run("keys", "list")
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["PROVIDER", "ID", "KEY", "ENABLED", "SOURCE", "STATUS"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows[setup.empty][2:5] == ["…LmNo", "yes", "stored"]
    assert rows[setup.keyed][2:5] == ["…0001", "yes", "config/env"]
    assert rows[setup.empty][5] == "unknown"
    # the columns are aligned: every row's KEY column starts where the header's does
    at = lines[0].index("KEY")
    assert all(line[at] == "…" for line in lines[1:])

    [key] = orjson.loads(run("keys", "list", setup.empty, "--json").stdout)
    assert set(key) >= {"provider", "id", "masked", "enabled", "source", "status"}
    ok = run("keys", "test", setup.empty, key["id"])
    assert ok.code == 0, ok.stderr
    assert "ok (HTTP 200" in ok.stdout
    probes = sim_control.requests(setup.empty, endpoint="models")
    assert probes and probes[-1]["key"] == secret
    sim_control.script(setup.empty, {"status": 401}, endpoint="models")
    bad = run("keys", "test", setup.empty, key["id"], "--json")
    assert bad.code == 1
    assert orjson.loads(bad.stdout) | {"latency_ms": 0} == {
        "id": key["id"],
        "ok": False,
        "upstream_status": 401,
        "latency_ms": 0,
        "status": "invalid",
        "error": "HTTP 401",
    }

    gone = run("keys", "remove", setup.empty, key["id"])
    assert gone.code == 0, gone.stderr
    assert key["id"] in gone.stdout
    within(PICK_UP_S, lambda: setup.chat(f"{setup.empty}/{MODEL}").status_code == 503, "the removed key gone")
    assert setup.keys(setup.empty) == []
    assert_secret_nowhere(setup, secret)


# ---- status ------------------------------------------------------------------------------------------------


def test_status_shows_providers_keys_cooldowns_and_traffic(setup: Setup, sim_control: SimControl) -> None:
    served = setup.chat(f"{setup.keyed}/{MODEL}")
    assert served.status_code == 200
    sim_control.script(setup.keyed, {"status": 429}, times=None)
    assert setup.chat(f"{setup.keyed}/{MODEL}").status_code == 429  # cools the key down
    [keyed_key] = setup.keys(setup.keyed)
    scope = f"{setup.keyed}/{MODEL}/{keyed_key['id']}"

    cooldowns = httpx.get(
        f"{setup.gateway.base_url}/admin/cooldowns", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ).json()["data"]
    [cooldown] = [c for c in cooldowns if c["scope"] == scope]
    assert cooldown["provider"] == setup.keyed and cooldown["key_id"] == keyed_key["id"]
    assert cooldown["until"] > time.time()

    remote = setup.remote("status")
    assert remote.code == 0, remote.stderr
    check_status_text(remote.stdout, setup, scope)

    # --config: the gateway writes its state behind (every 0.5 s); read until it is on disk
    def local_shows_it() -> bool:
        ran = setup.local("status")
        return ran.code == 0 and scope in ran.stdout and f"{setup.keyed}/{MODEL}" in ran.stdout.split("Traffic")[1]

    within(PICK_UP_S, local_shows_it, "the gateway's state in the data directory")
    check_status_text(setup.local("status").stdout, setup, scope)

    doc = orjson.loads(setup.local("status", "--json").stdout)
    assert {p["name"] for p in doc["providers"]} == {setup.empty, setup.keyed}
    assert scope in {c["scope"] for c in doc["cooldowns"]}
    [route] = [r for r in doc["traffic"]["routes"] if r["route"] == f"{setup.keyed}/{MODEL}"]
    assert route["requests"] >= 1 and route["failures"] >= 1


def check_status_text(text: str, setup: Setup, scope: str) -> None:
    sections = dict(
        (block.split("\n", 1)[0], block.split("\n", 1)[1]) for block in text.split("\n\n")[1:]
    )
    assert list(sections) == ["Providers", "Keys", "Cooldowns", "Traffic, last hour"]
    providers = {line.split()[0]: line.split() for line in sections["Providers"].splitlines()[1:]}
    assert providers[setup.empty] == [setup.empty, "openai", "0", "yes"]
    assert providers[setup.keyed] == [setup.keyed, "openai", "1", "yes"]
    assert "…0001" in sections["Keys"]
    assert scope in sections["Cooldowns"] and "(in " in sections["Cooldowns"]
    traffic = sections["Traffic, last hour"].splitlines()
    assert traffic[0].split() == ["ROUTE", "REQUESTS", "FAILED", "SUCCESS", "P50", "TOKENS", "IN", "TOKENS", "OUT"]
    [row] = [line.split() for line in traffic[1:] if line.startswith(f"{setup.keyed}/{MODEL} ")]
    assert int(row[1]) >= 1 and row[3].endswith("%") and row[5] == "ms"


# ---- bad input -------------------------------------------------------------------------------------------------


def test_bad_input_is_a_clear_message_and_the_right_exit_code(setup: Setup) -> None:
    cases: list[tuple[Callable[..., Ran], tuple[str, ...], int, str]] = []
    for run in (setup.local, setup.remote):
        cases += [
            (run, ("keys", "add", "no-such-provider", "sk-whatever-1234"), 2, "There is no provider `no-such-provider`"),
            (run, ("keys", "add", setup.empty, ""), 2, "the provider key is empty"),
            (run, ("keys", "add", setup.empty, "sk-bad\x01key"), 2, "control character (U+0001)"),
            (run, ("keys", "add", setup.empty, "two words"), 2, "whitespace"),
            (run, ("keys", "add", setup.keyed, "sk-from-env-0001"), 2, "already configured"),
            (run, ("keys", "remove", setup.empty, "0123456789abcdef"), 2, "has no key `0123456789abcdef`"),
            (run, ("keys", "test", setup.empty, "0123456789abcdef"), 2, "has no key `0123456789abcdef`"),
            (run, ("keys", "list", "no-such-provider"), 2, "There is no provider `no-such-provider`"),
        ]
    [config_key] = setup.keys(setup.keyed)
    cases.append((setup.local, ("keys", "remove", setup.keyed, config_key["id"]), 2, "configuration file or environment"))
    for run, args, code, message in cases:
        ran = run(*args)
        assert ran.code == code, (args, ran.both)
        assert message in ran.stderr, (args, ran.stderr)
        assert ran.stderr.startswith("freellm: ") and ran.stdout == "", (args, ran.both)

    wrong = setup.cli("status", "--url", setup.gateway.base_url, "--admin-key", "sk-wrong")
    assert wrong.code == 2 and "admin key rejected" in wrong.stderr
    client = setup.cli("keys", "list", "--url", setup.gateway.base_url, "--admin-key", CLIENT_KEY)
    assert client.code == 2 and "admin key rejected" in client.stderr

    dead = f"http://127.0.0.1:{free_port()}"
    unreachable = setup.cli("keys", "list", "--url", dead, "--admin-key", ADMIN_KEY)
    assert unreachable.code == 1 and f"cannot reach the gateway at {dead}: connection refused" in unreachable.stderr

    nowhere = setup.cli("keys", "list")
    assert nowhere.code == 2
    assert "--config PATH" in nowhere.stderr and "--url URL --admin-key KEY" in nowhere.stderr
    assert "FREELLM_URL" in nowhere.stderr and "FREELLM_ADMIN_KEY" in nowhere.stderr
    no_admin_key = setup.cli("status", "--url", setup.gateway.base_url)
    assert no_admin_key.code == 2 and "--admin-key" in no_admin_key.stderr
    not_http = setup.cli("status", "--url", "ftp://example.com", "--admin-key", ADMIN_KEY)
    assert not_http.code == 2 and "http(s) URL" in not_http.stderr
    both = setup.cli("status", "--url", setup.gateway.base_url, "--config", str(setup.config))
    assert both.code == 2 and "not allowed with" in both.stderr
    missing = setup.cli("keys", "list", "--config", str(setup.tmp / "missing.yaml"))
    assert missing.code == 2 and "cannot read config" in missing.stderr
    assert setup.keys(setup.empty) == []  # nothing was added by any of it


def test_the_master_key_must_match_the_stored_keys(setup: Setup) -> None:
    assert setup.local("keys", "add", setup.empty, "sk-cli-master-1234").code == 0
    other = setup.cli(
        "keys", "list", "--config", str(setup.config), env=setup.env(FREELLM_MASTER_KEY="ab" * 32)
    )
    assert other.code == 2 and "cannot be decrypted with this master key" in other.stderr
    assert setup.cli("keys", "list", "--config", str(setup.config), env=setup.env(FREELLM_MASTER_KEY="nope")).code == 2


# ---- colour and progress: a terminal, a pipe, NO_COLOR -----------------------------------------------------


def run_on_pty(args: list[str], env: dict[str, str], cwd: Path, *, stderr_on_pty: bool) -> tuple[str, str]:
    """Run the CLI with stdout (and, if asked, stderr) on a pseudo-terminal; what each received."""
    master, slave = os.openpty()
    err_master, err_slave = os.openpty() if stderr_on_pty else (-1, -1)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "freellm.cli", *args],
            stdout=slave,
            stderr=err_slave if stderr_on_pty else subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        os.close(slave)
        if stderr_on_pty:
            os.close(err_slave)
        out = read_pty(master)
        err = read_pty(err_master) if stderr_on_pty else proc.stderr.read().decode() if proc.stderr else ""
        assert proc.wait(CLI_TIMEOUT_S) == 0, out + err
    finally:
        os.close(master)
        if stderr_on_pty:
            os.close(err_master)
    return out, err


def read_pty(fd: int) -> str:
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_and_spinner_only_on_a_terminal_without_no_color(setup: Setup) -> None:
    args = ["status", "--url", setup.gateway.base_url, "--admin-key", ADMIN_KEY]
    env = setup.env(TERM="xterm")
    out, err = run_on_pty(args, env, setup.tmp, stderr_on_pty=True)
    assert "\x1b[1m" in out and "\x1b[0m" in out  # bold headers, reset
    assert "\x1b[32myes\x1b[0m" in out
    assert "reading the gateway's state…" in err and "\r\x1b[K" in err  # drawn, then erased

    piped = setup.cli(*args, env=env)
    assert piped.code == 0 and "\x1b" not in piped.stdout and piped.stderr == ""
    assert "Providers" in piped.stdout

    out, err = run_on_pty(args, setup.env(TERM="xterm", NO_COLOR="1"), setup.tmp, stderr_on_pty=True)
    assert "\x1b" not in out and "\x1b" not in err and "…" not in err
    assert "Providers" in out

    out, err = run_on_pty(args, setup.env(TERM="dumb"), setup.tmp, stderr_on_pty=True)
    assert "\x1b" not in out and err == ""

