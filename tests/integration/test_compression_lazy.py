"""``freellm.compression`` is an optional feature, imported lazily (issue 17): a gateway that does not
compress never loads it, yet every compression behaviour is kept — start-up errors for a bad
configuration, the admin stats and preview with compression off, a live change that turns it on.

The import check runs in a fresh interpreter: this test process has long imported the package.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from freellm.compression import Compressor
from freellm.config import CompressionConfig, ConfigError
from freellm.server.state import compression_configured
from freellm.sim import SimServer
from tests.harness import BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import MODEL

ADMIN_KEY = "sk-admin-lazy"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

START_AND_ASK = textwrap.dedent(
    """
    import asyncio, json, sys

    from aiohttp.test_utils import TestClient, TestServer

    from freellm.config import Settings
    from freellm.server.app import create_app
    from freellm.server.state import GATEWAY

    def loaded():
        return "freellm.compression" in sys.modules

    async def main():
        settings = Settings.model_validate(
            {"storage": {"path": sys.argv[1]}, "auth": {"admin_keys": [sys.argv[2]]}}
        )
        seen = {"import": loaded()}
        client = TestClient(TestServer(create_app(settings, client_keys=["sk-lazy-client"])))
        await client.start_server()
        try:
            seen["start"] = loaded()
            seen["built_at_start"] = client.app[GATEWAY].compressor is not None
            chat = await client.post(
                "/v1/chat/completions",
                json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer sk-lazy-client"},
            )
            seen["chat_status"] = chat.status
            seen["after_a_request"] = loaded()
            stats = await client.get("/admin/compression/stats", headers={"Authorization": "Bearer " + sys.argv[2]})
            seen["stats_status"] = stats.status
            seen["stats"] = await stats.json()
            seen["after_stats"] = loaded()
        finally:
            await client.close()
        print(json.dumps(seen))

    asyncio.run(main())
    """
)


def fresh_stats_off() -> dict[str, Any]:
    """What ``/admin/compression/stats`` answered with compression off when the compressor was built
    at start-up: a new compressor's counters, mode off."""
    return {**Compressor(CompressionConfig(), filters_dir=None).stats(), "mode": "off"}


def test_a_gateway_that_does_not_compress_never_imports_compression(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", START_AND_ASK, str(tmp_path / "data"), ADMIN_KEY],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["import"] is False
    assert seen["start"] is False and seen["built_at_start"] is False
    assert seen["chat_status"] >= 400  # no provider: refused, but through the whole pipeline
    assert seen["after_a_request"] is False
    # The first compression admin call builds it, and answers exactly as before.
    assert seen["stats_status"] == 200 and seen["after_stats"] is True
    assert seen["stats"] == fresh_stats_off()


StartGateway = Callable[..., GatewayServer]


@pytest.fixture
def start(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> Iterator[StartGateway]:
    """``start(compression={...}, data_dir=...)`` → a running gateway with one simulator provider."""
    started: list[GatewayServer] = []

    def factory(*, data_dir: Path | None = None, **compression: Any) -> GatewayServer:
        extra = {"compression": compression, "auth": {"admin_keys": [ADMIN_KEY]}}
        settings = gateway_settings(
            data_dir or tmp_path / f"gw{len(started)}", sim.base_url, {unique("alpha"): [MODEL]}, extra=extra
        )
        gw = start_gateway(servers_loop, settings)
        started.append(gw)
        return gw

    yield factory
    for gw in started:
        gw.close()


def test_stats_with_compression_off_are_unchanged_and_built_on_first_use(start: StartGateway) -> None:
    gw = start()
    assert gw.state.compressor is None
    assert "compress" not in gw.state.engine.pipeline.names
    stats = httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN)
    assert stats.status_code == 200 and stats.json() == fresh_stats_off()
    assert gw.state.compressor is not None
    preview = httpx.post(
        f"{gw.base_url}/admin/compression/preview",
        json={"messages": [{"role": "user", "content": "hello  \n\n\n\nthere"}]},
        headers=ADMIN,
    ).json()
    assert preview["mode"] == "standard" and preview["stages"]
    assert httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json() == fresh_stats_off()


@pytest.mark.parametrize(
    "engines",
    [{"squash": {}}, {"toolfilter": {"max_lines": "many"}}],
    ids=["unknown-engine", "bad-tunable"],
)
def test_a_bad_engine_config_is_still_a_start_up_error_with_compression_off(
    start: StartGateway, engines: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError):
        start(engines=engines)


def test_an_explicit_filters_dir_is_loaded_at_start_up(start: StartGateway, tmp_path: Path) -> None:
    filters = tmp_path / "filters"
    filters.mkdir()
    (filters / "broken.json").write_text("{not json")
    gw = start(filters_dir=str(filters))
    assert gw.state.compressor is not None
    (filters / "late.json").write_text("{added after start")  # read at start-up only, as before
    errors = httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json()["filter_errors"]
    assert len(errors) == 1 and "broken.json" in errors[0]


def test_filter_files_in_the_default_dir_are_loaded_at_start_up(start: StartGateway, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "filters").mkdir(parents=True)
    (data_dir / "filters" / "broken.json").write_text("{not json")
    gw = start(data_dir=data_dir)
    assert gw.state.compressor is not None
    errors = httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json()["filter_errors"]
    assert len(errors) == 1 and "broken.json" in errors[0]


def test_a_live_change_that_turns_compression_on_builds_it(start: StartGateway) -> None:
    gw = start()
    assert gw.state.compressor is None
    resp = httpx.patch(f"{gw.base_url}/admin/settings", json={"compression": {"mode": "lossless"}}, headers=ADMIN)
    assert resp.status_code == 200, resp.text
    assert gw.state.compressor is not None and "compress" in gw.state.engine.pipeline.names
    off = httpx.patch(f"{gw.base_url}/admin/settings", json={"compression": {"mode": "off"}}, headers=ADMIN)
    assert off.status_code == 200
    assert gw.state.compressor is None and "compress" not in gw.state.engine.pipeline.names
    stats = httpx.get(f"{gw.base_url}/admin/compression/stats", headers=ADMIN).json()
    assert stats == fresh_stats_off()


def test_what_counts_as_configured(tmp_path: Path) -> None:
    assert not compression_configured(CompressionConfig(), tmp_path)
    assert compression_configured(CompressionConfig(mode="lossless"), tmp_path)
    assert compression_configured(CompressionConfig.model_validate({"engines": {"dedup": {}}}), tmp_path)
    assert compression_configured(CompressionConfig(filters_dir=tmp_path / "nowhere"), tmp_path)
    (tmp_path / "filters").mkdir()
    (tmp_path / "filters" / "notes.txt").write_text("not a filter file")
    assert not compression_configured(CompressionConfig(), tmp_path)
    (tmp_path / "filters" / "rule.json").write_text("[]")
    assert compression_configured(CompressionConfig(), tmp_path)
