"""The simulator's support for "routing that learns": scripted response ``headers`` (rate-limit hints) on
every wire, answer shape and status, and the logged, scriptable model-list endpoints gateways use to
probe keys.

Like ``test_sim.py`` these start a real simulator and talk HTTP to it; synchronisation is by the
simulator's own events (``/_sim/wait``), never by sleeping.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson
import pytest
from multidict import CIMultiDictProxy

from freellm.sim import Scenario, ScenarioError, SimControl, SimServer, parse_scenario
from freellm.sim.control import SimControlError
from freellm.sim.scenario import SCENARIO_FIELDS

BEARER = {"Authorization": "Bearer sk-1"}
ANTHROPIC = {"x-api-key": "sk-ant-1", "anthropic-version": "2023-06-01"}
GEMINI = {"x-goog-api-key": "AIza-1"}
OPENAI_LIMITS = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"}
ANTHROPIC_LIMITS = {
    "anthropic-ratelimit-requests-remaining": "0",
    "anthropic-ratelimit-requests-reset": "2026-12-03T08:00:30Z",
}


# ---- one request per wire and shape ----------------------------------------------------------------------

# (wire, stream): how to send one chat request there. Gemini has two stream shapes (SSE, JSON array).
CASES = [
    ("openai", False),
    ("openai", True),
    ("anthropic", False),
    ("anthropic", True),
    ("gemini", False),
    ("gemini-sse", True),
    ("gemini-json", True),
]


async def chat(
    http: aiohttp.ClientSession, sim: SimServer, provider: str, wire: str, stream: bool
) -> tuple[int, CIMultiDictProxy[str], bytes]:
    """One chat request on ``wire``; returns status, headers and the whole body."""
    base = f"{sim.base_url}/{provider}"
    headers: dict[str, str]
    if wire == "openai":
        url, headers = f"{base}/v1/chat/completions", BEARER
        body: dict[str, Any] = {
            "model": "model-x",
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
        }
    elif wire == "anthropic":
        url, headers = f"{base}/v1/messages", ANTHROPIC
        body = {
            "model": "claude-x",
            "max_tokens": 50,
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
        }
    else:
        action = {"gemini": ":generateContent", "gemini-sse": ":streamGenerateContent?alt=sse"}.get(
            wire, ":streamGenerateContent"
        )
        url, headers = f"{base}/v1beta/models/gemini-2.5-flash{action}", GEMINI
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with http.post(url, json=body, headers=headers) as resp:
        return resp.status, resp.headers, await resp.read()


@pytest.mark.parametrize(("wire", "stream"), CASES)
async def test_headers_on_a_healthy_answer(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl, wire: str, stream: bool
) -> None:
    await ctl.script_async("p", {"headers": {**OPENAI_LIMITS, "x-count": 7, "x-ratio": 0.5, "x-round": 2.0}})
    status, headers, body = await chat(http, sim, "p", wire, stream)
    assert status == 200 and body
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["X-RateLimit-Reset-Requests"] == "2s"  # header names are case-insensitive
    assert (headers["x-count"], headers["x-ratio"], headers["x-round"]) == ("7", "0.5", "2")
    assert headers["X-Sim-Request-Id"].startswith("req-")  # the simulator's own headers stay
    [entry] = await ctl.requests_async("p")
    assert entry["outcome"] == "completed" and entry["endpoint"] == "chat"


@pytest.mark.parametrize(("wire", "stream"), CASES)
async def test_headers_on_a_scripted_error(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl, wire: str, stream: bool
) -> None:
    await ctl.script_async("p", {"status": 429, "retry_after": 2, "headers": ANTHROPIC_LIMITS})
    status, headers, body = await chat(http, sim, "p", wire, stream)
    assert status == 429
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert headers["anthropic-ratelimit-requests-reset"] == "2026-12-03T08:00:30Z"
    parsed = orjson.loads(body)
    if wire.startswith("gemini"):  # each wire keeps its own envelope (and Gemini its RetryInfo)
        assert parsed["error"]["status"] == "RESOURCE_EXHAUSTED" and "Retry-After" not in headers
    else:
        assert headers["Retry-After"] == "2" and parsed["error"]["type"] == "rate_limit_error"


async def test_headers_on_inband_error_and_verbatim_error_bodies(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("p", {"inband_error": "boom", "headers": {"x-a": "1"}})
    status, headers, _ = await chat(http, sim, "p", "openai", False)
    assert status == 200 and headers["x-a"] == "1"
    await ctl.script_async(
        "p", {"status": 502, "error_body": "<html>bad gateway</html>", "headers": {"x-b": "2"}}
    )
    status, headers, body = await chat(http, sim, "p", "openai", True)
    assert (status, headers["x-b"], headers["Content-Type"]) == (502, "2", "text/html; charset=utf-8")
    assert body == b"<html>bad gateway</html>"


async def test_a_scripted_content_type_replaces_the_wires(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    """A provider that labels its JSON or its stream wrongly is a fault worth scripting, so a scripted
    Content-Type wins instead of being sent next to the wire's."""
    for stream in (False, True):
        await ctl.script_async("p", {"headers": {"content-type": "text/plain"}})
        status, headers, _ = await chat(http, sim, "p", "openai", stream)
        assert status == 200 and headers.getall("Content-Type") == ["text/plain"]
    await ctl.script_async("p", {"status": 500, "error_body": "oops", "headers": {"Content-Type": "text/x"}})
    _, headers, _ = await chat(http, sim, "p", "openai", False)
    assert headers.getall("Content-Type") == ["text/x"]


async def test_headers_from_defaults_and_inline_directives(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.set_default_async({"headers": {"x-from": "default"}}, provider="p")
    _, headers, _ = await chat(http, sim, "p", "openai", False)
    assert headers["x-from"] == "default"
    spec = orjson.dumps({"p": {"headers": {"x-from": "inline"}}}).decode()
    body = {"model": "m", "messages": [{"role": "user", "content": f"hi [[sim:{spec}]]"}]}
    async with http.post(f"{sim.base_url}/p/v1/chat/completions", json=body, headers=BEARER) as resp:
        assert resp.headers["x-from"] == "inline"


async def test_chat_answers_without_headers_are_unchanged(
    sim: SimServer, http: aiohttp.ClientSession
) -> None:
    status, headers, _ = await chat(http, sim, "p", "openai", True)
    assert status == 200
    assert headers["Content-Type"] == "text/event-stream; charset=utf-8"
    assert not [h for h in headers if h.lower().startswith("x-ratelimit")]


# ---- validation --------------------------------------------------------------------------------------------


def test_headers_field_parses_and_is_in_the_validator_table() -> None:
    assert "headers" in SCENARIO_FIELDS
    assert Scenario().headers == {}
    assert parse_scenario({"headers": {}}) == Scenario()
    parsed = parse_scenario({"headers": {"x-n": 3, "x-f": 1.5, "x-s": "", "X-Token_~!": "ok"}})
    assert parsed.headers == {"x-n": "3", "x-f": "1.5", "x-s": "", "X-Token_~!": "ok"}


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        (["x-a", "1"], "expected an object"),
        (None, "expected an object"),
        ("x-a: 1", "expected an object"),
        ({"x-a": None}, "'headers.x-a'"),
        ({"x-a": True}, "'headers.x-a'"),
        ({"x-a": ["1"]}, "'headers.x-a'"),
        ({"x-a": {"v": 1}}, "'headers.x-a'"),
        ({"x a": "1"}, "not a valid header name"),
        ({"x-a:": "1"}, "not a valid header name"),
        ({"": "1"}, "not a valid header name"),
        ({"x-é": "1"}, "not a valid header name"),
        ({"x-a": "1\r\nx-injected: 1"}, "CR, LF or NUL"),
        ({"x-a": "1\n"}, "CR, LF or NUL"),
        ({"x-a": "\x00"}, "CR, LF or NUL"),
        ({"Content-Length": "5"}, "set by the simulator"),
        ({"transfer-encoding": "chunked"}, "set by the simulator"),
        ({"X-Sim-Request-Id": "req-1"}, "set by the simulator"),
        ({"x-a": "1", "X-A": "2"}, "name the same header"),
    ],
)
def test_bad_headers_are_scenario_errors_naming_the_field(headers: Any, fragment: str) -> None:
    with pytest.raises(ScenarioError, match="headers") as err:
        parse_scenario({"headers": headers})
    assert fragment in str(err.value)


def test_retry_after_is_given_once() -> None:
    with pytest.raises(ScenarioError, match="Retry-After"):
        parse_scenario({"status": 429, "retry_after": 5, "headers": {"retry-after": "5"}})
    # Either spelling alone is fine (the header also works on answers that are not errors).
    assert parse_scenario({"status": 429, "headers": {"Retry-After": "5"}}).headers == {"Retry-After": "5"}


async def test_control_api_rejects_bad_headers(ctl: SimControl) -> None:
    with pytest.raises(SimControlError) as err:
        await ctl.script_async("p", {"headers": {"x-a": "1\r\n"}})
    assert err.value.status == 400 and "headers" in str(err.value.detail)


# ---- model-list endpoints ----------------------------------------------------------------------------------


async def list_models(
    http: aiohttp.ClientSession, sim: SimServer, provider: str, wire: str, key: str | None
) -> tuple[int, CIMultiDictProxy[str], Any]:
    """``GET …/models`` the way each wire's client sends it; ``key=None`` sends no credential."""
    if wire == "openai":
        url, headers = f"{sim.base_url}/{provider}/v1/models", {"Authorization": f"Bearer {key}"}
    elif wire == "anthropic":
        url = f"{sim.base_url}/{provider}/v1/models"
        headers = {"x-api-key": key or "", "anthropic-version": "2023-06-01"}
    else:
        url, headers = f"{sim.base_url}/{provider}/v1beta/models", {"x-goog-api-key": key or ""}
    if key is None:
        headers = {k: v for k, v in headers.items() if k == "anthropic-version"}
    async with http.get(url, headers=headers) as resp:
        body = await resp.read()
        return resp.status, resp.headers, orjson.loads(body)


def listed_ids(wire: str, body: Any) -> list[str]:
    if wire == "gemini":
        return [m["name"].removeprefix("models/") for m in body["models"]]
    return [m["id"] for m in body["data"]]


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
async def test_model_list_is_logged_but_not_by_default(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl, wire: str
) -> None:
    status, headers, body = await list_models(http, sim, "p", wire, "sk-probe")
    assert status == 200 and listed_ids(wire, body) == ["model-x", "model-y", "model-z"]
    await chat(http, sim, "p", "openai", False)

    [chat_entry] = await ctl.requests_async("p")  # existing callers see chat requests only
    assert chat_entry["endpoint"] == "chat"
    [probe] = await ctl.requests_async("p", endpoint="models")
    assert probe["id"] == headers["X-Sim-Request-Id"]
    assert probe["endpoint"] == "models" and probe["key"] == "sk-probe"
    assert (probe["status"], probe["outcome"], probe["source"]) == (200, "completed", "default")
    assert (probe["model"], probe["body"], probe["stream"]) == (None, None, None)
    assert [e["endpoint"] for e in await ctl.requests_async(endpoint="all")] == ["models", "chat"]
    assert (await ctl.wait_ended_async(probe["id"]))["outcome"] == "completed"


async def test_model_list_wire_is_chosen_by_the_client_headers(
    sim: SimServer, http: aiohttp.ClientSession
) -> None:
    """``/v1/models`` is one path for OpenAI and Anthropic clients; Anthropic's always send
    ``anthropic-version``, so that (or ``x-api-key``) selects Anthropic's listing and envelopes."""
    _, _, openai = await list_models(http, sim, "p", "openai", "k")
    assert openai["object"] == "list" and openai["data"][0]["owned_by"] == "p"
    _, _, anthropic = await list_models(http, sim, "p", "anthropic", "k")
    assert anthropic["has_more"] is False and anthropic["data"][0]["type"] == "model"
    async with http.get(f"{sim.base_url}/p/v1/models", headers={"x-api-key": "k"}) as resp:
        assert resp.status == 200 and "has_more" in await resp.json()
    async with http.get(
        f"{sim.base_url}/p/v1/models", headers={"anthropic-version": "2023-06-01", **BEARER}
    ) as resp:
        assert resp.status == 200 and "has_more" in await resp.json()


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
async def test_model_list_without_a_key_is_a_logged_401(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl, wire: str
) -> None:
    status, _, body = await list_models(http, sim, "p", wire, None)
    assert status == 401
    if wire == "openai":
        assert body["error"]["code"] == "invalid_api_key"
    elif wire == "anthropic":
        assert body["error"]["type"] == "authentication_error"
    else:
        assert body["error"]["status"] == "UNAUTHENTICATED"
    [probe] = await ctl.requests_async("p", endpoint="models")
    assert (probe["outcome"], probe["status"], probe["key"]) == ("unauthorized", 401, None)


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
async def test_models_script_rejects_one_key_only_for_times_probes(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl, wire: str
) -> None:
    script = await ctl.script_async(
        "p",
        {"status": 401, "error_message": "invalid key", "headers": {"x-probe": "bad"}},
        key="sk-bad",
        times=2,
        endpoint="models",
    )
    assert script["endpoint"] == "models"
    status, _, _ = await list_models(http, sim, "p", wire, "sk-good")
    assert status == 200  # another key of the same provider is untouched
    results = [await list_models(http, sim, "p", wire, "sk-bad") for _ in range(3)]
    assert [r[0] for r in results] == [401, 401, 200]  # `times` uses, then the plain listing again
    status, headers, body = results[0]
    assert headers["x-probe"] == "bad"
    # The same envelope a chat request of the wire gets for that status.
    if wire == "openai":
        assert body == {
            "error": {
                "message": "invalid key",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
    elif wire == "anthropic":
        assert body == {"type": "error", "error": {"type": "authentication_error", "message": "invalid key"}}
    else:
        assert body == {"error": {"code": 401, "message": "invalid key", "status": "UNAUTHENTICATED"}}
    log = await ctl.requests_async("p", endpoint="models")
    assert [(e["key"], e["status"], e["source"]) for e in log] == [
        ("sk-good", 200, "default"),
        ("sk-bad", 401, f"script:{script['id']}"),
        ("sk-bad", 401, f"script:{script['id']}"),
        ("sk-bad", 200, "default"),
    ]
    assert [e["outcome"] for e in log][1:3] == ["error_status", "error_status"]


async def test_models_script_fields_that_apply(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    # Headers alone: a healthy probe that reports rate-limit state.
    await ctl.script_async("p", {"headers": OPENAI_LIMITS, "text": "ignored here"}, endpoint="models")
    status, headers, body = await list_models(http, sim, "p", "openai", "k")
    assert status == 200 and headers["x-ratelimit-remaining-requests"] == "0" and body["data"]
    # A 429 with Retry-After, a verbatim body, and Gemini's retry hint in the body.
    await ctl.script_async("p", {"status": 429, "retry_after": 9}, endpoint="models")
    status, headers, body = await list_models(http, sim, "p", "openai", "k")
    assert (status, headers["Retry-After"], body["error"]["code"]) == (429, "9", "rate_limit_exceeded")
    await ctl.script_async("p", {"status": 403, "error_body": {"detail": "banned"}}, endpoint="models")
    status, _, body = await list_models(http, sim, "p", "anthropic", "k")
    assert (status, body) == (403, {"detail": "banned"})
    await ctl.script_async("p", {"status": 429, "retry_after": 9}, endpoint="models")
    status, headers, body = await list_models(http, sim, "p", "gemini", "k")
    assert status == 429 and "Retry-After" not in headers
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "9s"} in body["error"][
        "details"
    ]
    # Chat-only faults do not touch a probe.
    await ctl.script_async("p", {"stall_after": 0, "cut_after": 0}, endpoint="models")
    assert (await list_models(http, sim, "p", "openai", "k"))[0] == 200


async def test_models_script_first_byte_delay(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("p", {"first_byte_delay_ms": 150, "status": 503}, endpoint="models")
    started = time.monotonic()
    status, _, _ = await list_models(http, sim, "p", "openai", "k")
    assert status == 503 and time.monotonic() - started >= 0.14


async def test_chat_and_models_scripts_never_cross(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    """A test that scripts "the next chat request fails" must not lose that fault to a key probe the
    gateway happens to run first, and a scripted probe failure must not break a chat answer."""
    await ctl.script_async("p", {"status": 500}, times=None)  # chat, until reset
    await ctl.script_async("p", {"status": 401}, times=None, endpoint="models")
    assert (await list_models(http, sim, "p", "openai", "k"))[0] == 401
    assert (await chat(http, sim, "p", "openai", False))[0] == 500
    await ctl.reset_async()
    await ctl.script_async("p", {"status": 401}, endpoint="models")
    assert (await chat(http, sim, "p", "openai", False))[0] == 200
    assert (await list_models(http, sim, "p", "openai", "k"))[0] == 401
    await ctl.script_async("p", {"status": 429})
    assert (await list_models(http, sim, "p", "openai", "k"))[0] == 200
    assert (await chat(http, sim, "p", "openai", False))[0] == 429
    await ctl.set_default_async({"status": 503}, provider="p")  # defaults describe chat answers only
    assert (await list_models(http, sim, "p", "openai", "k"))[0] == 200


async def test_scripts_listing_shows_the_endpoint(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("p", {"status": 401}, key="k", endpoint="models")
    await ctl.script_async("p", {"text": "x"})
    async with http.get(f"{sim.base_url}/_sim/scripts") as resp:
        scripts = (await resp.json())["scripts"]
    assert [(s["endpoint"], s["key"]) for s in scripts] == [("models", "k"), ("chat", None)]


async def test_control_api_checks_the_endpoint_fields(sim: SimServer, http: aiohttp.ClientSession) -> None:
    async def post(body: dict[str, Any]) -> tuple[int, Any]:
        async with http.post(f"{sim.base_url}/_sim/script", json=body) as resp:
            return resp.status, await resp.json()

    assert (await post({"provider": "p", "endpoint": "models", "scenario": {}}))[0] == 200
    for bad in (
        {"endpoint": "model"},
        {"endpoint": None},
        {"endpoint": "all"},
        {"endpoint": "models", "model": "model-x"},
        {"endpoint": "models", "match": "needle"},
        {"endpoints": "models"},
    ):
        status, body = await post({"provider": "p", **bad})
        assert status == 400, bad
        assert "endpoint" in body["error"] or "model" in body["error"]
    for path in ("/_sim/requests?endpoint=chats", "/_sim/wait?state=received&endpoint=x"):
        async with http.get(sim.base_url + path) as resp:
            assert resp.status == 400 and "endpoint" in (await resp.json())["error"]


async def test_wait_received_filters_by_endpoint(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await list_models(http, sim, "p", "openai", "k")
    with pytest.raises(TimeoutError):
        await ctl.wait_received_async("p", timeout=0.05)  # a probe is not a chat request
    [probe] = await ctl.wait_received_async("p", endpoint="models", timeout=1)
    assert probe["endpoint"] == "models"
    await chat(http, sim, "p", "openai", False)
    assert [e["endpoint"] for e in await ctl.wait_received_async("p", count=2, endpoint="all")] == [
        "models",
        "chat",
    ]
    async with http.get(f"{sim.base_url}/_sim/wait?state=received&provider=p&count=2&timeout=0.05") as resp:
        assert resp.status == 408 and (await resp.json())["received"] == 1


async def test_reset_clears_models_scripts_and_log(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("p", {"status": 401}, times=None, endpoint="models")
    await list_models(http, sim, "p", "openai", "k")
    await ctl.reset_async()
    assert await ctl.requests_async(endpoint="all") == []
    assert (await list_models(http, sim, "p", "openai", "k"))[0] == 200
