"""``GET /_sim/connections``: requests still being answered and TCP connections still open, which the
reliability suite reads after its load to prove the gateway let go of every upstream request.

Synchronisation is by the simulator's own events (``/_sim/wait``), never by sleeping.
"""

from __future__ import annotations

import aiohttp

from freellm.sim import SimServer, create_sim_app
from freellm.sim.control import SimControl
from freellm.sim.keys import SIM_STATE

AUTH = {"Authorization": "Bearer test-key"}
BODY = {"model": "model-x", "stream": True, "messages": [{"role": "user", "content": "hold on"}]}


async def test_a_stalled_request_is_in_flight_until_its_client_leaves(sim: SimServer) -> None:
    ctl = SimControl(sim.base_url)
    await ctl.script_async("p", {"stall_after": 0})
    # Control calls are never in flight, but the one asking is an open connection while it is answered.
    assert await ctl.connections_async() == {"in_flight": 0, "open_connections": 1}

    async with aiohttp.ClientSession() as http:
        resp = await http.post(f"{sim.provider_url('p')}/chat/completions", json=BODY, headers=AUTH)
        [record] = await ctl.wait_received_async("p")
        during = await ctl.connections_async()
        resp.close()  # hang up on the stall
        ended = await ctl.wait_ended_async(record["id"])
    after = await ctl.connections_async()

    assert during["in_flight"] == 1 and (during["open_connections"] or 0) >= 2
    assert ended["outcome"] == "client_disconnected"
    assert after["in_flight"] == 0


async def test_a_finished_request_leaves_nothing_in_flight(sim: SimServer) -> None:
    ctl = SimControl(sim.base_url)
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{sim.provider_url('p')}/chat/completions", json=BODY, headers=AUTH) as resp:
            assert resp.status == 200
            assert (await resp.read()).rstrip().endswith(b"data: [DONE]")
        counts = await ctl.connections_async()
    assert counts["in_flight"] == 0
    # The client's pooled keep-alive connection and the control call's are both still open.
    assert counts["open_connections"] == 2


def test_an_app_run_by_another_runner_reports_no_transport() -> None:
    app = create_sim_app()
    assert app[SIM_STATE].connections() == {"in_flight": 0, "open_connections": None}
