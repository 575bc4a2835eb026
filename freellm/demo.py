"""``freellm demo``: the simulator and the gateway together, one provider failing, failover visible."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web

from freellm.config import ModelConfig, ProviderConfig, Settings, StorageConfig
from freellm.server.app import create_app
from freellm.sim import Scenario, SimSettings, start_sim

__all__ = ["demo_settings", "run_demo"]

DEMO_KEY = "sk-freellm-demo"


def demo_settings(sim_url: str, data_dir: Path) -> Settings:
    """Two simulated providers serving one model; ``flaky`` always answers 500, ``steady`` works."""
    models = [ModelConfig(id="demo-model", context_window=32768)]
    return Settings.model_validate(
        {
            "auth": {"api_keys": [DEMO_KEY]},
            "storage": StorageConfig(path=data_dir),
            "providers": [
                ProviderConfig(name="flaky", base_url=f"{sim_url}/flaky/v1", keys=["sim-key-1"], models=models),
                ProviderConfig(name="steady", base_url=f"{sim_url}/steady/v1", keys=["sim-key-2"], models=models),
            ],
            "chain": ["flaky/demo-model", "steady/demo-model"],
        }
    )


async def run_demo(port: int = 3001, once: bool = False) -> int:
    sim_settings = SimSettings(
        per_model={"flaky/demo-model": Scenario(status=500, error_message="simulated outage")},
        default=Scenario(text="Hello! This answer came through freellm after the first provider failed.", chunks=6),
    )
    sim = await start_sim(port=0, settings=sim_settings)
    with tempfile.TemporaryDirectory(prefix="freellm-demo-") as tmp:
        runner = web.AppRunner(
            create_app(demo_settings(sim.base_url, Path(tmp))), handler_cancellation=True, access_log=None
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        base = f"http://127.0.0.1:{port}"
        try:
            await _show(base)
            if not once:
                print("\nGateway running; press Ctrl-C to stop.", flush=True)
                await asyncio.Event().wait()
        finally:
            await runner.cleanup()
            await sim.close()
    return 0


async def _show(base: str) -> None:
    body = {"model": "auto", "messages": [{"role": "user", "content": "Say hello"}]}
    headers = {"Authorization": f"Bearer {DEMO_KEY}"}
    async with aiohttp.ClientSession() as session, session.post(
        f"{base}/v1/chat/completions", json=body, headers=headers
    ) as resp:
        data = await resp.json()
        print(f"POST {base}/v1/chat/completions -> {resp.status}")
        for name in ("X-Routed-Via", "X-Fallback-Attempts", "X-Fallback-Trail"):
            print(f"  {name}: {resp.headers.get(name, '-')}")
        if resp.status == 200:
            print(f"  answer: {data['choices'][0]['message']['content']}")
    print(
        f"""
Try it yourself:

  curl -N {base}/v1/chat/completions \\
    -H 'Authorization: Bearer {DEMO_KEY}' -H 'Content-Type: application/json' \\
    -d '{{"model":"auto","stream":true,"messages":[{{"role":"user","content":"Hi"}}]}}' -i

  python - <<'PY'
from openai import OpenAI
client = OpenAI(base_url="{base}/v1", api_key="{DEMO_KEY}")
for chunk in client.chat.completions.create(model="auto", stream=True,
        messages=[{{"role": "user", "content": "Hi"}}]):
    print(chunk.choices[0].delta.content or "", end="", flush=True) if chunk.choices else None
print()
PY""",
        flush=True,
    )
