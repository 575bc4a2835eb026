"""The ``freellm`` command as users run it: real processes on free ports, driven over HTTP.

Every process is started by the test with a clean environment (``HOME`` and ``XDG_DATA_HOME`` in the
test's tmp dir, no provider keys), waited for by polling ``/health`` against a deadline, and stopped at
the end by its own pid. Tests that need an upstream use the session simulator (scripted through its
control API) or a ``freellm sim`` process of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from openai import OpenAI

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import free_port, unique

START_DEADLINE_S = 20.0
PYTHON = sys.executable


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: no provider keys, data dirs inside ``tmp``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp / "home"),
        "XDG_DATA_HOME": str(tmp / "xdg-data"),
        "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "FREELLM_LOG_LEVEL": "WARNING",
    }
    env.update(extra)
    return env


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, path: str = "/health") -> None:
        """Poll ``path`` until it answers 200; fail if the process exits or the deadline passes."""
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                pytest.fail(f"process exited with {self.popen.returncode}:\n{self.stdout()}\n{self.stderr()}")
            try:
                if httpx.get(self.base_url + path, timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # poll interval of a bounded readiness check, not a synchronisation sleep
        pytest.fail(f"not ready within {START_DEADLINE_S}s:\n{self.stdout()}\n{self.stderr()}")

    def terminate(self, timeout: float) -> tuple[int, float]:
        """SIGTERM, then wait: (exit code, seconds to exit)."""
        started = time.monotonic()
        self.popen.send_signal(signal.SIGTERM)
        code = self.popen.wait(timeout)
        return code, time.monotonic() - started


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """``spawn(["serve", ...], env=..., port=...)`` → a running ``freellm`` process, stopped at teardown."""
    started: list[Proc] = []

    def factory(args: list[str], *, env: dict[str, str] | None = None, port: int | None = None) -> Proc:
        n = len(started)
        out, err = tmp_path / f"proc{n}.out", tmp_path / f"proc{n}.err"
        with out.open("wb") as fout, err.open("wb") as ferr:
            popen = subprocess.Popen(
                [PYTHON, "-m", "freellm.cli", *args],
                stdout=fout,
                stderr=ferr,
                env=env if env is not None else clean_env(tmp_path),
                cwd=tmp_path,
            )
        proc = Proc(popen, out, err, port or 0)
        started.append(proc)
        return proc

    yield factory
    for proc in started:
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGTERM)
            try:
                proc.popen.wait(10)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(5)


def write_config(tmp_path: Path, name: str = "freellm.yaml", **fmt: Any) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(CONFIG).format(**fmt), encoding="utf-8")
    return path


CONFIG = """\
    server:
      host: 127.0.0.1
      port: ${{GW_PORT:-3001}}
      shutdown_grace_s: ${{GRACE_S:-10}}
      ip_rate_limit_rpm: 0
    auth:
      api_keys: ["${{CLIENT_KEY}}"]
    storage:
      path: ./data
    providers:
      - name: {provider}
        kind: openai
        base_url: ${{SIM_URL}}/{provider}/v1
        keys: ["${{UPSTREAM_KEY}}", "${{UNSET_UPSTREAM_KEY}}"]
        models:
          - id: model-x
            context_window: 32768
    chain: ["{provider}/model-x"]
"""


def serve_with_config(
    spawn: Callable[..., Proc], tmp_path: Path, sim_url: str, provider: str, **env: str
) -> tuple[Proc, str]:
    port = free_port()
    config = write_config(tmp_path, provider=provider)
    client_key = "sk-cli-" + unique("k")
    proc_env = clean_env(
        tmp_path,
        GW_PORT=str(port),
        CLIENT_KEY=client_key,
        SIM_URL=sim_url,
        UPSTREAM_KEY="sk-upstream-from-env",
        **env,
    )
    proc = spawn(["serve", "--config", str(config)], env=proc_env, port=port)
    proc.wait_ready()
    return proc, client_key


# ── serve --config ──────────────────────────────────────────────────────────────────────────────────


def test_serve_with_yaml_config_and_env_substitution(spawn: Callable[..., Proc], tmp_path: Path) -> None:
    """A ``freellm sim`` process and a ``freellm serve --config`` process talking to each other."""
    sim_port = free_port()
    sim = spawn(["sim", "--port", str(sim_port)], port=sim_port)
    sim.wait_ready("/_sim/health")
    provider = unique("alpha")
    gw, client_key = serve_with_config(spawn, tmp_path, sim.base_url, provider)

    health = httpx.get(f"{gw.base_url}/health", timeout=5)
    assert health.status_code == 200 and health.json() == {"status": "ok"}

    client = OpenAI(base_url=f"{gw.base_url}/v1", api_key=client_key, max_retries=0, timeout=15)
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Hello"}]
    )
    assert raw.headers["X-Routed-Via"] == f"{provider}/model-x"
    assert raw.parse().choices[0].message.content == f"Hello from {provider}/model-x."
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model="model-x", stream=True, messages=[{"role": "user", "content": "Hello"}]
        )
        if chunk.choices
    )
    assert streamed == f"Hello from {provider}/model-x."

    # ${UPSTREAM_KEY} reached the upstream; the unset ${UNSET_UPSTREAM_KEY} became no key at all.
    upstream = SimControl(sim.base_url).requests(provider=provider)
    assert [r["key"] for r in upstream] == ["sk-upstream-from-env", "sk-upstream-from-env"]
    # The relative storage path is resolved next to the config file.
    assert (tmp_path / "data" / "freellm.db").exists()
    assert httpx.get(f"{gw.base_url}/v1/models", timeout=5).status_code == 401

    code, took = gw.terminate(timeout=15)
    assert code == 0, gw.stderr()
    assert took < 5  # nothing in flight: no reason to wait for the grace
    assert "Traceback" not in gw.stderr()


def read_stream_until_end(
    resp: httpx.Response, on_first_content: Callable[[], None]
) -> tuple[list[str], str | None]:
    """Every ``data:`` payload, and the transport error that ended the read (None for a clean end)."""
    data: list[str] = []
    fired = False
    try:
        for line in resp.iter_lines():
            if not line.startswith("data: "):
                continue
            payload = line[len("data: ") :]
            data.append(payload)
            if not fired and payload != "[DONE]":
                frame = json.loads(payload)
                if frame.get("choices") and frame["choices"][0]["delta"].get("content"):
                    fired = True
                    on_first_content()
    except httpx.TransportError as exc:
        return data, f"{type(exc).__name__}: {exc}"
    return data, None


def stream_text(data: list[str]) -> str:
    out = []
    for payload in data:
        if payload == "[DONE]":
            continue
        frame = json.loads(payload)
        if frame.get("choices"):
            out.append(frame["choices"][0]["delta"].get("content") or "")
    return "".join(out)


def stream_then_sigterm(gw: Proc, client_key: str, prompt: str) -> tuple[list[str], str | None, int, float]:
    """Stream one answer and SIGTERM the gateway when its first content arrives: the frames read, how
    the stream was cut (None when it ended properly), the exit code, and seconds from SIGTERM to exit."""
    body = {"model": "auto", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    sent_at: list[float] = []

    def sigterm() -> None:
        sent_at.append(time.monotonic())
        gw.popen.send_signal(signal.SIGTERM)

    with httpx.stream(
        "POST",
        f"{gw.base_url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {client_key}"},
        timeout=20,
    ) as resp:
        assert resp.status_code == 200
        data, cut = read_stream_until_end(resp, sigterm)
    code = gw.popen.wait(15)
    return data, cut, code, time.monotonic() - sent_at[0]


def test_sigterm_waits_for_an_inflight_stream_to_finish(
    spawn: Callable[..., Proc], tmp_path: Path, sim: SimServer, sim_control: SimControl
) -> None:
    provider = unique("alpha")
    text = "one two three four five six seven eight"
    sim_control.script(provider, {"text": text, "chunks": 8, "chunk_delay_ms": 120}, times=1)
    gw, client_key = serve_with_config(spawn, tmp_path, sim.base_url, provider, GRACE_S="10")

    # SIGTERM as soon as the first content arrives: the stream still has ~0.8 s to go.
    data, cut, code, took = stream_then_sigterm(gw, client_key, "count")

    assert cut is None, f"stream cut silently: {cut}"
    assert stream_text(data) == text
    assert data[-1] == "[DONE]"
    assert code == 0, gw.stderr()
    assert took < 10  # within the grace: the stream finished, then the process exited
    # New connections are refused once the shutdown started.
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{gw.base_url}/health", timeout=2)


def test_sigterm_past_the_grace_period_ends_the_stream_with_an_error_frame(
    spawn: Callable[..., Proc], tmp_path: Path, sim: SimServer, sim_control: SimControl
) -> None:
    provider = unique("alpha")
    sim_control.script(provider, {"chunks": 40, "chunk_delay_ms": 250, "text": "x" * 400}, times=1)
    grace = 1.0
    gw, client_key = serve_with_config(spawn, tmp_path, sim.base_url, provider, GRACE_S=str(grace))

    data, cut, code, took = stream_then_sigterm(gw, client_key, "long story")

    assert code == 0, gw.stderr()
    # aiohttp waits up to the grace for the handler, then cancels it and waits up to the grace again.
    assert took <= 2 * grace + 2.0, took
    frames = [json.loads(d) for d in data if d != "[DONE]"]
    errors = [f["error"] for f in frames if "error" in f]
    assert len(stream_text(data)) < 400  # it really was interrupted
    assert len(errors) == 1, (data, cut)
    assert errors[0]["type"] == "stream_error"
    assert "shutting down" in errors[0]["message"]
    assert data[-1] == "[DONE]", (data[-3:], cut)
    assert cut is None, f"the stream was not terminated cleanly: {cut}"


def test_sigterm_past_the_grace_answers_a_waiting_request_with_503(
    spawn: Callable[..., Proc], tmp_path: Path, sim: SimServer, sim_control: SimControl
) -> None:
    """Nothing sent yet when the grace runs out (the upstream is still silent): a 503, not a reset."""
    provider = unique("alpha")
    sim_control.script(provider, {"first_byte_delay_ms": 30_000}, times=2)
    grace = 0.5
    gw, client_key = serve_with_config(spawn, tmp_path, sim.base_url, provider, GRACE_S=str(grace))
    headers = {"Authorization": f"Bearer {client_key}"}
    url = f"{gw.base_url}/v1/chat/completions"

    def ask(stream: bool) -> httpx.Response:
        body = {
            "model": "auto",
            "stream": stream,
            "messages": [{"role": "user", "content": f"wait {stream}"}],
        }
        return httpx.post(url, json=body, headers=headers, timeout=20)

    with ThreadPoolExecutor(2) as pool:
        pending = [pool.submit(ask, False), pool.submit(ask, True)]
        deadline = time.monotonic() + 10
        while len(sim_control.requests(provider=provider)) < 2:  # both requests reached the upstream
            assert time.monotonic() < deadline, "the requests never reached the simulator"
            time.sleep(0.02)
        code, took = gw.terminate(timeout=15)
        answers = [f.result(timeout=15) for f in pending]

    assert code == 0, gw.stderr()
    assert took <= 2 * grace + 2.0, took
    for resp in answers:
        assert resp.status_code == 503, resp.text
        err = resp.json()["error"]
        assert err["code"] == "shutting_down" and err["type"] == "service_unavailable"
        assert resp.headers.get("X-Request-ID")


# ── serve without a config ──────────────────────────────────────────────────────────────────────────

KEY_LINE = re.compile(r"client API key: (sk-freellm-\S+)")


def start_bare(spawn: Callable[..., Proc], env: dict[str, str]) -> Proc:
    port = free_port()
    proc = spawn(["serve", "--port", str(port)], env=env, port=port)
    proc.wait_ready()
    return proc


def chat_status(proc: Proc, key: str) -> httpx.Response:
    return httpx.post(
        f"{proc.base_url}/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )


def test_serve_without_config_generates_and_keeps_a_client_key(
    spawn: Callable[..., Proc], tmp_path: Path
) -> None:
    env = clean_env(tmp_path)
    first = start_bare(spawn, env)
    match = KEY_LINE.search(first.stdout())
    assert match, first.stdout()
    key = match.group(1)
    assert "providers with keys: 0" in first.stdout()

    assert httpx.get(f"{first.base_url}/health", timeout=5).status_code == 200
    resp = chat_status(first, key)
    assert resp.status_code == 503, resp.text
    assert resp.json()["error"]["code"] == "no_providers_configured"
    assert chat_status(first, "sk-wrong").status_code == 401
    # Stored under the user data dir taken from XDG_DATA_HOME.
    stored = Path(env["XDG_DATA_HOME"]) / "freellm" / "client_key"
    assert stored.read_text().strip() == key
    assert stored.stat().st_mode & 0o077 == 0  # private to the user
    code, _ = first.terminate(timeout=15)
    assert code == 0, first.stderr()

    # A restart reuses the stored key.
    second = start_bare(spawn, env)
    match2 = KEY_LINE.search(second.stdout())
    assert match2 and match2.group(1) == key
    assert chat_status(second, key).status_code == 503
    code, _ = second.terminate(timeout=15)
    assert code == 0

    # FREELLM_API_KEY overrides the stored key (which then no longer works).
    third = start_bare(spawn, {**env, "FREELLM_API_KEY": "sk-from-env"})
    assert key not in third.stdout()
    assert chat_status(third, "sk-from-env").status_code == 503
    assert chat_status(third, key).status_code == 401
    assert stored.read_text().strip() == key  # left alone


# ── demo and check-config ───────────────────────────────────────────────────────────────────────────


def test_demo_once_shows_the_failover(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [PYTHON, "-m", "freellm.cli", "demo", "--once", "--port", str(port)],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"POST http://127.0.0.1:{port}/v1/chat/completions -> 200" in out
    assert "X-Fallback-Attempts: 1" in out
    assert "X-Fallback-Trail: flaky/demo-model key1=upstream_error" in out
    assert "X-Routed-Via: steady/demo-model" in out
    # --once really exits: the port is free again.
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


BAD_CONFIGS = {
    "not-yaml": ("providers: [unclosed\n", "not valid YAML"),
    "not-a-mapping": ("- just\n- a list\n", "must be a mapping"),
    "schema": (
        "providers:\n  - name: alpha\n    keys: [k]\n    modles: []\n",
        "providers.0.base_url",
    ),
    "bad-type": ("server:\n  port: lots\n", "server.port"),
    "duplicate": (
        "providers:\n  - {name: a, base_url: 'http://x/v1'}\n  - {name: a, base_url: 'http://y/v1'}\n",
        "duplicate provider name",
    ),
    "unknown-compression-engine": ("compression:\n  mode: standard\n  engines: {squash: {}}\n", "squash"),
    "bad-engine-tunable": (
        "compression:\n  engines: {toolfilter: {max_lines: many}}\n",
        "toolfilter",
    ),
    "unknown-profile": (
        "auth:\n  api_keys: [{key: sk-1, profile: ghost}]\n",
        "unknown profile 'ghost'",
    ),
    "profile-chain-unknown-route": (
        "providers:\n  - {name: a, base_url: 'http://x/v1', models: [{id: m}]}\n"
        "profiles:\n  team: {chain: [a/nope]}\n",
        "unknown route 'a/nope'",
    ),
    "profile-named-like-a-strategy": ("profiles:\n  fastest: {system_prompt: hi}\n", "routing strategy name"),
    "unknown-routing-strategy": ("routing: {strategy: quickest}\n", "unknown routing strategy 'quickest'"),
    "fusion-k-over-cap": ("fusion: {default_k: 9, max_k: 8}\n", "fusion.default_k"),
    "admin-key-is-a-client-key": (
        "auth: {api_keys: [same], admin_keys: [same]}\n",
        "both a client key",
    ),
}


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "freellm.cli", *args],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_check_config_rejects_a_bad_file_with_exit_2(tmp_path: Path, case: str) -> None:
    text, expected = BAD_CONFIGS[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    done = run_cli(tmp_path, "check-config", str(path))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("freellm: "), done.stderr
    assert expected in done.stderr, done.stderr
    assert str(path) in done.stderr
    assert "Traceback" not in done.stderr


def test_check_config_missing_file_and_serve_with_a_bad_file(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "check-config", str(tmp_path / "nope.yaml"))
    assert done.returncode == 2 and "cannot read config" in done.stderr

    bad = tmp_path / "bad.yaml"
    bad.write_text("server: {port: lots}\n", encoding="utf-8")
    served = run_cli(tmp_path, "serve", "--config", str(bad))
    assert served.returncode == 2 and "server.port" in served.stderr and "Traceback" not in served.stderr


def test_check_config_accepts_a_good_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, provider="alpha")
    done = run_cli(tmp_path, "check-config", str(path))
    assert done.returncode == 0, done.stderr
    # UPSTREAM_KEY is unset in the clean env: the provider has no usable key, which is not an error.
    assert done.stdout.strip() == "ok: 1 providers (0 with keys), chain of 1"

    # The installed console script is the same command.
    script = Path(PYTHON).parent / "freellm"
    if not script.exists():
        pytest.skip("no freellm console script next to this interpreter")
    via_script = subprocess.run(
        [str(script), "check-config", str(path)],
        env=clean_env(tmp_path, UPSTREAM_KEY="sk-set"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert via_script.returncode == 0, via_script.stderr
    assert via_script.stdout.strip() == "ok: 1 providers (1 with keys), chain of 1"


def test_serve_on_a_taken_port_fails_with_a_message(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(tmp_path, "serve", "--port", str(port))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"freellm: cannot serve on 127.0.0.1:{port}" in done.stderr
    assert "address already in use" in done.stderr
    assert "Traceback" not in done.stderr


# ── serve --workers ─────────────────────────────────────────────────────────────────────────────────

WORKERS_CONFIG = """\
    server: {{host: 127.0.0.1, port: {port}, ip_rate_limit_rpm: 0, shutdown_grace_s: 5}}
    auth: {{api_keys: ["{key}"]}}
    storage: {{path: ./data}}
    fallback: {{cooldown_local_s: 120}}
    providers:
      - {{name: {a}, base_url: "{sim}/{a}/v1", keys: [ka], models: [{{id: model-x}}]}}
      - {{name: {b}, base_url: "{sim}/{b}/v1", keys: [kb], models: [{{id: model-x}}]}}
    chain: ["{a}/model-x", "{b}/model-x"]
"""


def workers_synced_since(db: Path, since: float, workers: int) -> bool:
    """True once every worker published its state (and so read everyone else's) after ``since``."""
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as con:
        try:
            rows = con.execute("SELECT worker, MIN(updated) FROM worker_usage GROUP BY worker").fetchall()
        except sqlite3.OperationalError:
            return False
    return len(rows) >= workers and all(updated > since for _, updated in rows)


def test_workers_share_the_port_and_a_cooldown(spawn: Callable[..., Proc], tmp_path: Path, sim: SimServer) -> None:
    """Two worker processes: a key cooled down by one is skipped by the other, and SIGTERM stops both."""
    sim_url = sim.base_url
    a, b = unique("alpha"), unique("beta")
    SimControl(sim_url).script(a, {"status": 429, "retry_after": "120"}, times=None)
    port, key = free_port(), "sk-workers-" + unique("k")
    config = tmp_path / "workers.yaml"
    config.write_text(
        textwrap.dedent(WORKERS_CONFIG).format(port=port, key=key, sim=sim_url, a=a, b=b), encoding="utf-8"
    )
    gw = spawn(["serve", "--config", str(config), "--workers", "2"], port=port)
    gw.wait_ready()
    headers = {"Authorization": f"Bearer {key}"}
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}

    first = httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=headers, timeout=10)
    assert first.status_code == 200 and first.headers["X-Routed-Via"] == f"{b}/model-x"
    cooled_at = time.time()
    deadline = time.monotonic() + 10
    while not workers_synced_since(tmp_path / "data" / "freellm.db", cooled_at, 2):
        assert time.monotonic() < deadline, "the workers never synced their state"
        time.sleep(0.05)  # poll interval of a bounded condition, not a synchronisation sleep

    for _ in range(20):  # a fresh connection each time: the kernel spreads them over both workers
        resp = httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=headers, timeout=10)
        assert resp.status_code == 200 and resp.headers["X-Routed-Via"] == f"{b}/model-x"
        assert "X-Fallback-Attempts" not in resp.headers
    assert len(SimControl(sim_url).requests(provider=a)) == 1

    code, _ = gw.terminate(timeout=20)
    assert code == 0, gw.stderr()
    assert "Traceback" not in gw.stderr()


@pytest.fixture
def redis_namespace() -> Iterator[str]:
    """A Redis namespace of this test's own, deleted afterwards."""
    import redis

    namespace = f"t_{uuid.uuid4().hex}"
    yield namespace
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    try:
        keys = list(client.scan_iter(match=f"{namespace}:*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def test_workers_share_limits_and_cooldowns_through_redis(
    spawn: Callable[..., Proc], tmp_path: Path, sim: SimServer, redis_namespace: str
) -> None:
    """``serve --workers 2`` with ``storage.redis_url``: the workers' hot state is Redis, so a key's
    ``rpm: 3`` holds for both at once and a 429 seen by one is skipped by the other — no sync wait."""
    sim_url = sim.base_url
    a, b = unique("alpha"), unique("beta")
    port, key = free_port(), "sk-workers-" + unique("k")
    config = tmp_path / "workers.yaml"
    config.write_text(
        textwrap.dedent(WORKERS_CONFIG).format(port=port, key=key, sim=sim_url, a=a, b=b).replace(
            "storage: {path: ./data}", f"storage: {{path: ./data, redis_url: 'redis://127.0.0.1:6379/0', namespace: {redis_namespace}}}"
        ).replace("models: [{id: model-x}]}", "models: [{id: model-x, limits: {rpm: 3}}]}", 1),
        encoding="utf-8",
    )
    gw = spawn(["serve", "--config", str(config), "--workers", "2"], port=port)
    gw.wait_ready()
    headers = {"Authorization": f"Bearer {key}"}
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    routes = [
        httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=headers, timeout=10).headers["X-Routed-Via"]
        for _ in range(9)  # a fresh connection each time: the kernel spreads them over both workers
    ]
    assert routes.count(f"{a}/model-x") == 3 and len(SimControl(sim_url).requests(provider=a)) == 3
    SimControl(sim_url).script(b, {"status": 429, "retry_after": "120"}, times=1)
    cooled = httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=headers, timeout=10)
    assert cooled.status_code == 429  # a is at its limit, b answered 429: nothing left
    for _ in range(6):  # both workers skip b at once: it stays cooling down everywhere
        assert httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=headers, timeout=10).status_code == 429
    assert len(SimControl(sim_url).requests(provider=b)) == 7  # 6 answered, 1 refused, then skipped by both
    code, _ = gw.terminate(timeout=20)
    assert code == 0, gw.stderr()


# -- freellm keys rotate-master ------------------------------------------------------------------------------
def run_keys_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "freellm.cli", "keys", *args],
        env=clean_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )


def vault_keys(data: Path, master: bytes, add: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, str]]:
    """(provider, secret) of every key the data dir's store holds, after adding ``add`` — through the
    real SQLite store and vault, as the gateway would."""
    import asyncio

    from freellm.secrets import KeyVault
    from freellm.store.factory import create_store

    async def run() -> list[tuple[str, str]]:
        store = create_store(data)
        await store.open()
        try:
            vault = KeyVault(store, master)
            await vault.load()
            for provider, secret in add:
                await vault.add(provider, secret)
            held = vault.keys()
            return [(k.provider, k.secret) for k in held]
        finally:
            await store.close()

    return asyncio.run(run())


def test_keys_rotate_master_with_a_key_file(tmp_path: Path) -> None:
    from freellm.secrets import MasterKeyError, load_master_key

    config = write_config(tmp_path, provider="alpha")
    data = tmp_path / "data"
    old = load_master_key({}, data)
    stored = (("alpha", "sk-rotate-one-0123456789"), ("beta", "sk-rotate-two-9876543210"))
    assert vault_keys(data, old, stored) == list(stored)

    done = run_keys_cli(tmp_path, "rotate-master", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "re-encrypted 2 provider keys under the new master key" in done.stdout
    assert f"new master key written to {data / 'master.key'}" in done.stdout
    new = load_master_key({}, data)  # also checks the file is still mode 0600
    assert new != old
    assert new.hex() not in done.stdout + done.stderr
    assert vault_keys(data, new) == list(stored)
    with pytest.raises(MasterKeyError):
        vault_keys(data, old)
    db = b"".join(p.read_bytes() for p in data.glob("freellm.db*"))
    assert b"sk-rotate" not in db

    # --new-key-env: the operator's own key.
    chosen = bytes(range(32))
    done = run_keys_cli(tmp_path, "rotate-master", "--config", str(config), "--new-key-env", "NEXT", NEXT=chosen.hex())
    assert done.returncode == 0, done.stderr
    assert load_master_key({}, data) == chosen and vault_keys(data, chosen) == list(stored)


def test_keys_rotate_master_with_the_env_key_prints_the_new_one_once(tmp_path: Path) -> None:
    from freellm.secrets import MASTER_KEY_ENV

    config = write_config(tmp_path, provider="alpha")
    data = tmp_path / "data"
    old = bytes(range(100, 132))
    assert vault_keys(data, old, (("alpha", "sk-env-rotate-0123456789"),)) == [("alpha", "sk-env-rotate-0123456789")]

    done = run_keys_cli(tmp_path, "rotate-master", "--config", str(config), **{MASTER_KEY_ENV: old.hex()})
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and MASTER_KEY_ENV in done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith(f"{MASTER_KEY_ENV}=")]
    assert len(printed) == 1
    new = bytes.fromhex(printed[0].split("=", 1)[1])
    assert "re-encrypted 1 provider key under the new master key" in done.stdout
    assert not (data / "master.key").exists()  # the env key is never copied to disk
    assert vault_keys(data, new) == [("alpha", "sk-env-rotate-0123456789")]


@pytest.mark.parametrize(
    ("env", "extra", "expected"),
    [
        ({}, [], "no master key to rotate"),
        ({"FREELLM_MASTER_KEY": "not-a-real-master-key"}, [], "FREELLM_MASTER_KEY is neither hex nor valid base64"),
        (
            {"FREELLM_MASTER_KEY": "ab" * 32, "NEXT": "cd" * 16},
            ["--new-key-env", "NEXT"],
            "NEXT looks like hex but is 32 characters",
        ),
        ({"FREELLM_MASTER_KEY": "ab" * 32}, ["--new-key-env", "NOPE"], "NOPE is not set"),
    ],
    ids=["no-master", "bad-env", "bad-new", "unset-new"],
)
def test_keys_rotate_master_errors_exit_2(
    tmp_path: Path, env: dict[str, str], extra: list[str], expected: str
) -> None:
    config = write_config(tmp_path, provider="alpha")
    done = run_keys_cli(tmp_path, "rotate-master", "--config", str(config), *extra, **env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("freellm: ") and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    for value in env.values():
        assert value not in done.stderr + done.stdout
    assert not (tmp_path / "data" / "master.key").exists()
