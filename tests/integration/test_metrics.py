"""Over the wire: ``GET /metrics`` (docs/metrics.md) on a real gateway in front of the simulator.

Every test scrapes its own fresh gateway (each app owns its registry, so the counters start at zero and
two gateways in this process never share one), makes a known set of requests with the official SDKs or
plain HTTP, and checks that each metric moved by exactly what those requests did. The exposition is
parsed with prometheus_client's own text parser. A stream's handler finishes its bookkeeping just after
the client read the terminator, so a scrape first waits (against a deadline) for the in-flight gauge to
reach zero: the gauge drops only after the turn was counted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pydantic
import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from freellm.config import Settings
from freellm.sim import SimServer
from freellm.sim.control import SimControl
from tests.harness import CLIENT_KEY, GatewayServer, free_port, unique
from tests.integration.helpers import AUTH, MODEL, MakeGateway, anthropic_sdk, one_route, sdk, two_routes

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

METRICS_KEY = "sk-metrics-test"
ADMIN_KEY = "sk-admin-test"
SETTLE_DEADLINE_S = 5.0
COOLED = {"fallback": {"cooldown_local_s": 120}}
"""The simulator is on loopback: keep a failed key cooled down for the whole test."""


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One series' value (0 when the series does not exist yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every series of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, lbls), v in samples.items() if n == name and want <= set(lbls))


def scrape_raw(base_url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{base_url}/metrics", headers=headers or {}, timeout=10)


def scrape(base_url: str, headers: dict[str, str] | None = None) -> Samples:
    """A scrape once no client request is in flight (every finished turn is counted by then)."""
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while True:
        resp = scrape_raw(base_url, headers)
        assert resp.status_code == 200, resp.text
        samples = parse(resp.text)
        if value(samples, "freellm_inflight_requests") == 0:
            return samples
        assert time.monotonic() < deadline, "a request stayed in flight"
        time.sleep(0.02)  # poll interval of a bounded condition, not a synchronisation sleep


def chat(gw: GatewayServer, text: str = "hi", **extra: Any) -> httpx.Response:
    payload = {"model": "auto", "messages": [{"role": "user", "content": text}], **extra}
    return httpx.post(f"{gw.v1}/chat/completions", json=payload, headers=AUTH, timeout=10)


# ---- the counters move by exactly the requests made ------------------------------------------------------


def test_every_metric_moves_by_exactly_the_requests_made(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, extra=COOLED)
    first, second = f"{a}/{MODEL}", f"{b}/{MODEL}"
    before = scrape(gw.base_url)
    assert total(before, "freellm_requests_total") == 0
    assert value(before, "freellm_cooldowns_active") == 0
    client = sdk(gw)

    # 1. a chat completion, answered by the first route
    plain = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    assert plain.usage is not None
    # 2. a streamed one, with its usage
    chunks = list(
        client.chat.completions.create(
            model="auto",
            messages=[{"role": "user", "content": "stream please"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    [streamed] = [c.usage for c in chunks if c.usage is not None]
    # 3. an Anthropic Messages request
    message = anthropic_sdk(gw).messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hello"}]
    )
    # 4. a failover: the first route's key fails once (and is cooled down), the second answers
    sim_control.script(a, {"status": 500, "error_message": "upstream exploded"})
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "fail over"}]
    )
    assert raw.headers["x-routed-via"] == second and raw.headers["x-fallback-attempts"] == "1"
    failed_over = raw.parse().usage
    assert failed_over is not None

    resp = scrape_raw(gw.base_url)
    assert resp.headers["content-type"] == CONTENT_TYPE_LATEST
    after = scrape(gw.base_url)
    requests = {
        dict(lbls)["surface"] + " " + dict(lbls)["route"] + " " + dict(lbls)["status"]: v
        for (name, lbls), v in after.items()
        if name == "freellm_requests_total"
    }
    assert requests == {f"chat {first} 200": 2, f"anthropic {first} 200": 1, f"chat {second} 200": 1}
    assert total(after, "freellm_fallback_attempts_total") == 1
    assert value(after, "freellm_fallback_attempts_total", error_class="upstream_error") == 1
    tokens_in = plain.usage.prompt_tokens + streamed.prompt_tokens + message.usage.input_tokens
    tokens_out = plain.usage.completion_tokens + streamed.completion_tokens + message.usage.output_tokens
    assert value(after, "freellm_tokens_total", direction="in") == tokens_in + failed_over.prompt_tokens
    assert value(after, "freellm_tokens_total", direction="out") == tokens_out + failed_over.completion_tokens
    assert value(after, "freellm_request_duration_seconds_count") == 4
    assert value(after, "freellm_request_duration_seconds_bucket", le="+Inf") == 4
    assert value(after, "freellm_request_duration_seconds_sum") > 0
    assert value(after, "freellm_ttft_seconds_count") == 4
    assert value(after, "freellm_inflight_requests") == 0
    assert value(after, "freellm_cooldowns_active") == 1  # the first route's key
    assert total(after, "freellm_cache_requests_total") == 0  # the cache is off: no result at all


def test_the_output_never_carries_a_key_or_message_text(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    gw, a, b = two_routes(make_gateway, keys={}, extra=COOLED)
    secret = f"{a}-key-1"
    sim_control.script(a, {"status": 401, "error_message": f"invalid api key {secret}"})
    resp = chat(gw, "a very private question")
    assert resp.status_code == 200 and resp.headers["x-routed-via"] == f"{b}/{MODEL}"
    scrape(gw.base_url)
    text = scrape_raw(gw.base_url).text
    assert value(parse(text), "freellm_fallback_attempts_total", error_class="auth") == 1
    for leaked in (secret, f"{b}-key-1", CLIENT_KEY, "private question", "invalid api key"):
        assert leaked not in text


def test_a_client_error_counts_with_route_none(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    resp = chat(gw, model="no-such-model")
    assert resp.status_code == 404
    after = scrape(gw.base_url)
    assert value(after, "freellm_requests_total", surface="chat", route="none", status="404") == 1
    assert total(after, "freellm_tokens_total") == 0
    assert value(after, "freellm_ttft_seconds_count") == 0
    assert value(after, "freellm_request_duration_seconds_count") == 1


# ---- the cache --------------------------------------------------------------------------------------------


def test_a_cache_hit_is_route_cache_and_result_hit(make_gateway: MakeGateway) -> None:
    gw, a = one_route(make_gateway, extra={"cache": {"enabled": True}})
    missed = chat(gw, "cache me")
    hit = chat(gw, "cache me")
    assert missed.headers["x-freellm-cache"] == "MISS" and hit.headers["x-freellm-cache"] == "HIT"
    assert hit.content == missed.content
    bypassed = httpx.post(
        f"{gw.v1}/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "cache me"}]},
        headers={**AUTH, "X-FreeLLM-Cache": "off"},
        timeout=10,
    )
    assert bypassed.headers["x-freellm-cache"] == "BYPASS"

    after = scrape(gw.base_url)
    assert value(after, "freellm_requests_total", surface="chat", route=f"{a}/{MODEL}", status="200") == 2
    assert value(after, "freellm_requests_total", surface="chat", route="cache", status="200") == 1
    assert value(after, "freellm_cache_requests_total", result="miss") == 1
    assert value(after, "freellm_cache_requests_total", result="hit") == 1
    assert value(after, "freellm_cache_requests_total", result="bypass") == 1
    # a hit costs no upstream tokens: only the two upstream answers count
    usage = [r.json()["usage"] for r in (missed, bypassed)]
    assert value(after, "freellm_tokens_total", direction="in") == sum(u["prompt_tokens"] for u in usage)
    assert value(after, "freellm_tokens_total", direction="out") == sum(u["completion_tokens"] for u in usage)
    assert value(after, "freellm_request_duration_seconds_count") == 3
    assert value(after, "freellm_ttft_seconds_count") == 2  # a replay has no first token


# ---- fusion ---------------------------------------------------------------------------------------------


def test_a_fusion_request_counts_once_and_its_members_failed_attempts(
    make_gateway: MakeGateway, sim_control: SimControl
) -> None:
    names = [unique(f"p{i}") for i in range(3)]
    gw = make_gateway({name: [MODEL] for name in names}, extra=COOLED)
    sim_control.script(names[1], {"status": 500}, times=None)
    raw = sdk(gw).chat.completions.with_raw_response.create(
        model="fusion", messages=[{"role": "user", "content": "What is the capital of France?"}],
        extra_body={"fusion": {"k": 2}},
    )
    usage = json.loads(raw.text)["usage"]

    after = scrape(gw.base_url)
    requests = {lbls: v for (name, lbls), v in after.items() if name == "freellm_requests_total"}
    assert requests == {(("route", "fusion"), ("status", "200"), ("surface", "chat")): 1}
    assert value(after, "freellm_fallback_attempts_total", error_class="upstream_error") == 1
    assert value(after, "freellm_tokens_total", direction="in") == usage["prompt_tokens"]
    assert value(after, "freellm_tokens_total", direction="out") == usage["completion_tokens"]
    assert value(after, "freellm_request_duration_seconds_count") == 1


# ---- two apps, one process --------------------------------------------------------------------------------


def test_two_gateways_in_one_process_count_apart(make_gateway: MakeGateway) -> None:
    gw1, _ = one_route(make_gateway)
    gw2, _ = one_route(make_gateway)
    assert chat(gw1).status_code == 200
    assert total(scrape(gw1.base_url), "freellm_requests_total") == 1
    assert total(scrape(gw2.base_url), "freellm_requests_total") == 0


# ---- who may scrape ---------------------------------------------------------------------------------------


def test_metrics_are_open_without_a_metrics_key(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway)
    resp = scrape_raw(gw.base_url)  # no client key either
    assert resp.status_code == 200
    assert resp.headers["content-type"] == CONTENT_TYPE_LATEST
    assert "freellm_inflight_requests" in {f.name for f in text_string_to_metric_families(resp.text)}


def test_metrics_turned_off_count_nothing_and_answer_404(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway, extra={"metrics": {"enabled": False}})
    assert gw.state.metrics is None
    assert chat(gw).status_code == 200
    resp = scrape_raw(gw.base_url)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"


def test_a_metrics_key_is_required_when_set(make_gateway: MakeGateway) -> None:
    gw, _ = one_route(make_gateway, extra={"auth": {"metrics_key": METRICS_KEY, "admin_keys": [ADMIN_KEY]}})
    refused = [
        {},
        {"Authorization": "Bearer sk-wrong"},
        {"Authorization": f"Bearer {CLIENT_KEY}"},  # a client key is never a metrics key
        {"Authorization": f"Bearer {ADMIN_KEY}"},
        {"x-api-key": METRICS_KEY},  # Bearer only
        {"Authorization": f"Basic {METRICS_KEY}"},
    ]
    for headers in refused:
        resp = scrape_raw(gw.base_url, headers)
        assert resp.status_code == 401, headers
        error = resp.json()["error"]
        assert error["type"] == "authentication_error" and error["code"] == "invalid_metrics_key"
        assert METRICS_KEY not in resp.text
    ok = scrape_raw(gw.base_url, {"Authorization": f"Bearer {METRICS_KEY}"})
    assert ok.status_code == 200 and ok.headers["content-type"] == CONTENT_TYPE_LATEST
    assert chat(gw).status_code == 200  # the client API is unchanged
    after = scrape(gw.base_url, {"Authorization": f"Bearer {METRICS_KEY}"})
    assert total(after, "freellm_requests_total") == 1  # scrapes are not client requests


@pytest.mark.parametrize("clash", ["client", "admin"])
def test_a_metrics_key_may_not_be_a_client_or_admin_key(clash: str) -> None:
    key = CLIENT_KEY if clash == "client" else ADMIN_KEY
    with pytest.raises(pydantic.ValidationError, match="metrics key"):
        Settings.model_validate({"auth": {"api_keys": [CLIENT_KEY], "admin_keys": [ADMIN_KEY], "metrics_key": key}})


def test_a_blank_metrics_key_leaves_metrics_open() -> None:
    assert Settings.model_validate({"auth": {"metrics_key": "  "}}).auth.metrics_key is None
    assert Settings().auth.metrics_key is None


# ---- serve --workers: every worker's requests summed -------------------------------------------------------

START_DEADLINE_S = 20.0

WORKERS_CONFIG = """\
    server: {{host: 127.0.0.1, port: {port}, ip_rate_limit_rpm: 0, shutdown_grace_s: 5}}
    auth: {{api_keys: ["{key}"]}}
    storage: {{path: ./data}}
    providers:
      - {{name: {a}, base_url: "{sim}/{a}/v1", keys: [ka], models: [{{id: model-x}}]}}
    chain: ["{a}/model-x"]
"""


@dataclass
class Served:
    """A running ``freellm serve --workers N``."""

    proc: subprocess.Popen[bytes]
    base_url: str
    key: str
    tmp: Path
    """Its ``TMPDIR``: where the parent makes the workers' metrics directory."""


@pytest.fixture
def serve_workers(tmp_path: Path, sim: SimServer) -> Iterator[Callable[[int], Served]]:
    """``serve_workers(2)`` → a ``freellm serve --workers 2`` process, ready; stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(workers: int) -> Served:
        port, key, a = free_port(), "sk-" + unique("k"), unique("alpha")
        config = tmp_path / "workers.yaml"
        config.write_text(
            textwrap.dedent(WORKERS_CONFIG).format(port=port, key=key, sim=sim.base_url, a=a), encoding="utf-8"
        )
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path / "home"),
            "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "FREELLM_LOG_LEVEL": "WARNING",
        }
        with (tmp_path / "serve.out").open("wb") as out, (tmp_path / "serve.err").open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "freellm.cli", "serve", "--config", str(config), "--workers", str(workers)],
                stdout=out,
                stderr=err,
                env=env,
                cwd=tmp_path,
            )
        started.append(proc)
        base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            assert proc.poll() is None, (tmp_path / "serve.err").read_text()
            try:
                if httpx.get(f"{base_url}/health", timeout=1).status_code == 200:
                    return Served(proc, base_url, key, tmp)
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the workers never became ready"
            time.sleep(0.05)  # poll interval of a bounded readiness check, not a synchronisation sleep

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def requests_per_worker(metrics_dir: Path) -> dict[str, float]:
    """``freellm_requests_total`` as each worker's own file holds it (keyed by the file's pid)."""
    out: dict[str, float] = {}
    for path in metrics_dir.glob("counter_*.db"):
        pid = path.stem.split("_")[-1]
        families = MultiProcessCollector.merge([str(path)])
        out[pid] = sum(
            s.value for f in families if f.name == "freellm_requests" for s in f.samples if s.name.endswith("_total")
        )
    return out


def test_serve_workers_sums_every_workers_requests(serve_workers: Callable[[int], Served]) -> None:
    served = serve_workers(2)
    base_url = served.base_url
    [metrics_dir] = [p for p in served.tmp.iterdir() if p.name.startswith("freellm-metrics-")]
    headers = {"Authorization": f"Bearer {served.key}"}
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    sent = 0
    # A fresh connection each time: the kernel spreads them over both workers. Go on until both
    # answered some (bounded), so the sum below is over two processes' files.
    while sent < 200:
        resp = httpx.post(f"{base_url}/v1/chat/completions", json=body, headers=headers, timeout=10)
        assert resp.status_code == 200
        sent += 1
        per_worker = requests_per_worker(metrics_dir)
        if sent >= 10 and len([n for n in per_worker.values() if n > 0]) == 2:
            break
    per_worker = requests_per_worker(metrics_dir)
    assert len(per_worker) == 2 and all(n > 0 for n in per_worker.values()), per_worker
    assert sum(per_worker.values()) == sent

    for _ in range(6):  # whichever worker answers the scrape, it reports every worker's requests
        samples = scrape(base_url)
        assert total(samples, "freellm_requests_total") == sent
        assert value(samples, "freellm_request_duration_seconds_count") == sent
        assert value(samples, "freellm_inflight_requests") == 0
        assert value(samples, "freellm_cooldowns_active") == 0
        assert total(samples, "freellm_tokens_total", direction="out") > 0

    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(20) == 0
    assert not metrics_dir.exists()  # the parent removes the directory once every worker has exited
