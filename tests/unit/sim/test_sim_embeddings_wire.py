"""The simulator's embeddings endpoints over real HTTP: OpenAI ``/v1/embeddings`` and Gemini
``:embedContent``/``:batchEmbedContents``, their routes, auth, 400s, the request log and every scripted
fault that applies (status with Retry-After, first-byte delay, cut, stall), plus the official ``openai``
SDK (float and its default base64) and the ``google-genai`` SDK as clients.

Synchronisation is by the simulator's own events (``/_sim/wait``), never by sleeping.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest

from freellm.sim import SimControl, SimServer, SimSettings, sim_vector, start_sim
from freellm.sim.control import SimControlError
from freellm.sim.embeddings import decode_base64

BEARER = {"Authorization": "Bearer sk-emb"}
GOOG = {"x-goog-api-key": "AIza-emb"}


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any, aiohttp.ClientResponse]:
    async with http.post(url, json=body, headers=BEARER if headers is None else headers) as resp:
        return resp.status, await resp.json(), resp


def openai_url(sim: SimServer, provider: str = "alpha") -> str:
    return sim.provider_url(provider) + "/embeddings"


def gemini_url(
    sim: SimServer, model: str, action: str, provider: str = "gem", version: str = "v1beta"
) -> str:
    return f"{sim.base_url}/{provider}/{version}/models/{model}:{action}"


def batch(model: str, *texts: str, **extra: Any) -> dict[str, Any]:
    return {
        "requests": [
            {"model": f"models/{model}", "content": {"parts": [{"text": t}]}, **extra} for t in texts
        ]
    }


# ---- OpenAI wire -----------------------------------------------------------------------------------------


async def test_openai_embeddings_answer(sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl) -> None:
    status, body, resp = await post(http, openai_url(sim), {"model": "emb", "input": ["hi", "there you"]})
    assert status == 200
    assert body == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": sim_vector("emb", "hi", 8)},
            {"object": "embedding", "index": 1, "embedding": sim_vector("emb", "there you", 8)},
        ],
        "model": "emb",
        "usage": {"prompt_tokens": 1 + 3, "total_tokens": 4},
    }
    [entry] = await ctl.requests_async("alpha", endpoint="embeddings")
    assert entry["id"] == resp.headers["X-Sim-Request-Id"]
    assert (entry["endpoint"], entry["model"], entry["key"], entry["source"]) == (
        "embeddings",
        "emb",
        "sk-emb",
        "default",
    )
    assert entry["body"] == {"model": "emb", "input": ["hi", "there you"]}
    assert (await ctl.wait_ended_async(entry["id"]))["outcome"] == "completed"


async def test_openai_embeddings_unprefixed_dimensions_and_base64(
    sim: SimServer, http: aiohttp.ClientSession
) -> None:
    body = {"model": "emb", "input": "x", "dimensions": 5, "encoding_format": "base64"}
    status, answer, _ = await post(http, f"{sim.base_url}/v1/embeddings", body)
    assert status == 200
    assert decode_base64(answer["data"][0]["embedding"]) == sim_vector("emb", "x", 5)


async def test_settings_choose_the_default_width(http: aiohttp.ClientSession) -> None:
    async with await start_sim(settings=SimSettings(embedding_dimensions=3)) as sim:
        _, answer, _ = await post(http, openai_url(sim), {"model": "emb", "input": "x"})
        assert answer["data"][0]["embedding"] == sim_vector("emb", "x", 3)
        _, answer, _ = await post(
            http, gemini_url(sim, "g", "embedContent"), {"content": {"parts": [{"text": "x"}]}}, GOOG
        )
        assert answer["embedding"]["values"] == sim_vector("g", "x", 3)


async def test_openai_missing_key_and_bad_body(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    status, body, _ = await post(http, openai_url(sim), {"model": "emb", "input": "x"}, headers={})
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, body, _ = await post(http, openai_url(sim), {"model": "emb", "input": [""]})
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == "input"
    async with http.post(openai_url(sim), data=b"{not json", headers=BEARER) as resp:
        assert resp.status == 400
    log = await ctl.requests_async("alpha", endpoint="embeddings")
    assert [(e["outcome"], e["status"]) for e in log] == [
        ("unauthorized", 401),
        ("bad_request", 400),
        ("bad_request", 400),
    ]


# ---- Gemini wire -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1beta", "v1"])
async def test_gemini_embed_content_and_batch(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl, version: str
) -> None:
    one = {
        "content": {"parts": [{"text": "hello"}]},
        "taskType": "RETRIEVAL_QUERY",
        "outputDimensionality": 4,
    }
    status, body, _ = await post(http, gemini_url(sim, "gem-emb", "embedContent", version=version), one, GOOG)
    assert (status, body) == (200, {"embedding": {"values": sim_vector("gem-emb", "hello", 4)}})
    url = gemini_url(sim, "gem-emb", "batchEmbedContents", version=version)
    status, body, _ = await post(http, url, batch("gem-emb", "a", "b"), GOOG)
    assert status == 200
    assert body == {"embeddings": [{"values": sim_vector("gem-emb", t, 8)} for t in ("a", "b")]}
    log = await ctl.requests_async("gem", endpoint="embeddings")
    assert [(e["model"], e["key"], e["status"]) for e in log] == [("gem-emb", "AIza-emb", 200)] * 2


async def test_gemini_unprefixed_routes_are_the_default_provider(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    body = {"content": {"parts": [{"text": "x"}]}}
    for version in ("v1beta", "v1"):
        url = f"{sim.base_url}/{version}/models/gem-emb:embedContent"
        status, answer, _ = await post(http, url, body, GOOG)
        assert status == 200 and answer["embedding"]["values"] == sim_vector("gem-emb", "x", 8)
    log = await ctl.requests_async("default", endpoint="embeddings")
    assert [e["model"] for e in log] == ["gem-emb", "gem-emb"]


async def test_gemini_refusals_are_google_statuses(sim: SimServer, http: aiohttp.ClientSession) -> None:
    too_many = batch("gem-emb", *[str(i) for i in range(101)])
    status, body, _ = await post(http, gemini_url(sim, "gem-emb", "batchEmbedContents"), too_many, GOOG)
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert "at most 100 requests can be in one batch" in body["error"]["message"]
    status, body, _ = await post(
        http, gemini_url(sim, "gem-emb", "batchEmbedContents"), batch("other", "x"), GOOG
    )
    assert status == 400 and "models/gem-emb" in body["error"]["message"]
    status, body, _ = await post(
        http, gemini_url(sim, "gem-emb", "embedContent"), {"content": {"parts": [{"text": "x"}]}}, {}
    )
    assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    status, body, _ = await post(http, gemini_url(sim, "gem-emb", "countTokens"), {}, GOOG)
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"  # other actions still unknown


# ---- scripted faults -------------------------------------------------------------------------------------


async def test_scripted_429_with_retry_after(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    script = await ctl.script_async(
        "alpha",
        {
            "status": 429,
            "retry_after": 7,
            "error_message": "slow down",
            "headers": {"x-ratelimit-remaining-requests": "0"},
        },
        endpoint="embeddings",
    )
    assert script["endpoint"] == "embeddings"
    status, body, resp = await post(http, openai_url(sim), {"model": "emb", "input": "x"})
    assert status == 429
    assert resp.headers["Retry-After"] == "7" and resp.headers["x-ratelimit-remaining-requests"] == "0"
    assert body == {
        "error": {
            "message": "slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert (await post(http, openai_url(sim), {"model": "emb", "input": "x"}))[0] == 200  # times=1 used up
    log = await ctl.requests_async("alpha", endpoint="embeddings")
    assert [(e["status"], e["outcome"], e["source"]) for e in log] == [
        (429, "error_status", f"script:{script['id']}"),
        (200, "completed", "default"),
    ]


async def test_gemini_scripted_429_puts_the_retry_in_the_body(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("gem", {"status": 429, "retry_after": 12}, endpoint="embeddings")
    status, body, resp = await post(
        http, gemini_url(sim, "gem-emb", "batchEmbedContents"), batch("gem-emb", "x"), GOOG
    )
    assert status == 429 and "Retry-After" not in resp.headers
    assert body["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"} in body["error"][
        "details"
    ]


async def test_scripted_cut_closes_without_an_answer(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("alpha", {"cut_after": 0}, endpoint="embeddings")
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await post(http, openai_url(sim), {"model": "emb", "input": "cut me"})
    [cut] = await ctl.requests_async("alpha", match="cut me", endpoint="embeddings")
    assert (await ctl.wait_ended_async(cut["id"]))["outcome"] == "cut"

    await ctl.script_async("gem", {"cut_after": 3}, endpoint="embeddings")  # any count: no answer at all
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await post(
            http, gemini_url(sim, "gem-emb", "embedContent"), {"content": {"parts": [{"text": "x"}]}}, GOOG
        )
    [entry] = await ctl.requests_async("gem", endpoint="embeddings")
    assert (await ctl.wait_ended_async(entry["id"]))["outcome"] == "cut"


async def test_scripted_stall_never_answers(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("alpha", {"stall_after": 0}, endpoint="embeddings")
    with pytest.raises(TimeoutError):
        async with http.post(
            openai_url(sim),
            json={"model": "emb", "input": "stall me"},
            headers=BEARER,
            timeout=aiohttp.ClientTimeout(total=0.2),
        ) as resp:
            await resp.read()
    [stalled] = await ctl.requests_async("alpha", endpoint="embeddings")
    assert (await ctl.wait_ended_async(stalled["id"]))["outcome"] == "client_disconnected"


async def test_scripted_first_byte_delay(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("alpha", {"first_byte_delay_ms": 150}, endpoint="embeddings")
    started = time.monotonic()
    status, _, _ = await post(http, openai_url(sim), {"model": "emb", "input": "x"})
    assert status == 200 and time.monotonic() - started >= 0.14


async def test_script_filters_model_key_and_match(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await ctl.script_async("alpha", {"status": 503}, model="emb-b", times=None, endpoint="embeddings")
    await ctl.script_async("alpha", {"status": 402}, key="sk-poor", times=None, endpoint="embeddings")
    await ctl.script_async("alpha", {"status": 500}, match="needle", times=None, endpoint="embeddings")
    assert (await post(http, openai_url(sim), {"model": "emb-a", "input": "x"}))[0] == 200
    assert (await post(http, openai_url(sim), {"model": "emb-b", "input": "x"}))[0] == 503
    poor = {"Authorization": "Bearer sk-poor"}
    assert (await post(http, openai_url(sim), {"model": "emb-a", "input": "x"}, poor))[0] == 402
    assert (await post(http, openai_url(sim), {"model": "emb-a", "input": ["a", "the needle"]}))[0] == 500
    gem = await post(
        http,
        gemini_url(sim, "emb-b", "embedContent", provider="alpha"),
        {"content": {"parts": [{"text": "x"}]}},
        GOOG,
    )
    assert gem[0] == 503  # the model of a Gemini URL is the model scripts filter on


async def test_embeddings_and_chat_scripts_and_defaults_never_cross(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    chat = {"model": "emb", "messages": [{"role": "user", "content": "hi"}]}
    await ctl.script_async("alpha", {"status": 429})  # a chat script
    assert (await post(http, openai_url(sim), {"model": "emb", "input": "x"}))[0] == 200
    async with http.post(sim.provider_url("alpha") + "/chat/completions", json=chat, headers=BEARER) as resp:
        assert resp.status == 429
    await ctl.script_async("alpha", {"status": 500}, endpoint="embeddings")
    async with http.post(sim.provider_url("alpha") + "/chat/completions", json=chat, headers=BEARER) as resp:
        assert resp.status == 200
    async with http.get(sim.provider_url("alpha") + "/models", headers=BEARER) as resp:
        assert resp.status == 200
    assert (await post(http, openai_url(sim), {"model": "emb", "input": "x"}))[0] == 500
    # defaults (per model and the server's) describe chat answers only
    await ctl.set_default_async({"status": 503}, provider="alpha")
    await ctl.set_default_async({"status": 503, "cut_after": 0})
    assert (await post(http, openai_url(sim), {"model": "emb", "input": "x"}))[0] == 200
    assert (await post(http, f"{sim.base_url}/v1/embeddings", {"model": "emb", "input": "x"}))[0] == 200


async def test_log_and_wait_filter_by_endpoint(
    sim: SimServer, http: aiohttp.ClientSession, ctl: SimControl
) -> None:
    await post(http, openai_url(sim), {"model": "emb", "input": "x"})
    assert await ctl.requests_async("alpha") == []  # chat only by default
    with pytest.raises(TimeoutError):
        await ctl.wait_received_async("alpha", timeout=0.05)
    [entry] = await ctl.wait_received_async("alpha", endpoint="embeddings", timeout=1)
    assert entry["endpoint"] == "embeddings"
    async with http.get(sim.provider_url("alpha") + "/models", headers=BEARER) as resp:
        assert resp.status == 200
    assert [e["endpoint"] for e in await ctl.requests_async(endpoint="all")] == ["embeddings", "models"]
    async with http.get(f"{sim.base_url}/_sim/requests?endpoint=embeddings&model=emb") as resp:
        assert [e["model"] for e in (await resp.json())["requests"]] == ["emb"]
    async with http.get(f"{sim.base_url}/_sim/scripts") as resp:
        assert (await resp.json())["scripts"] == []
    await ctl.reset_async()
    assert await ctl.requests_async(endpoint="embeddings") == []


async def test_control_api_endpoint_values(sim: SimServer, ctl: SimControl) -> None:
    stored = await ctl.script_async("p", {"status": 500}, model="emb", match="x", endpoint="embeddings")
    assert (stored["endpoint"], stored["model"], stored["match"]) == ("embeddings", "emb", "x")
    with pytest.raises(SimControlError) as info:
        await ctl.script_async("p", {}, endpoint="embedding")  # type: ignore[arg-type]
    assert "embeddings" in str(info.value.detail)


# ---- SDKs as clients -------------------------------------------------------------------------------------


async def test_openai_sdk_float_and_default_base64(sim: SimServer, ctl: SimControl) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(base_url=sim.provider_url("alpha"), api_key="sk-sdk", max_retries=0)
    try:
        floats = await client.embeddings.create(model="emb", input=["a", "b"], encoding_format="float")
        assert [d.embedding for d in floats.data] == [sim_vector("emb", "a", 8), sim_vector("emb", "b", 8)]
        assert floats.usage.prompt_tokens == 2 and floats.model == "emb"

        default = await client.embeddings.create(model="emb", input="a", dimensions=16)
        assert default.data[0].embedding == sim_vector("emb", "a", 16)

        tokens = await client.embeddings.create(model="emb", input=[[1, 2, 3]])
        assert tokens.data[0].embedding == sim_vector("emb", "1 2 3", 8) and tokens.usage.prompt_tokens == 3

        await ctl.script_async("alpha", {"status": 429, "retry_after": 3}, endpoint="embeddings")
        with pytest.raises(openai.RateLimitError) as info:
            await client.embeddings.create(model="emb", input="a")
        assert info.value.response.headers["Retry-After"] == "3"
    finally:
        await client.close()
    encodings = [
        e["body"].get("encoding_format") for e in await ctl.requests_async("alpha", endpoint="embeddings")
    ]
    assert encodings == ["float", "base64", "base64", "base64"]  # the SDK asks for base64 unless told


@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
async def test_google_genai_sdk_embed_content(sim: SimServer, ctl: SimControl) -> None:
    genai = pytest.importorskip("google.genai")
    types = pytest.importorskip("google.genai.types")
    client = genai.Client(
        api_key="AIza-sdk",
        http_options=types.HttpOptions(base_url=f"{sim.base_url}/gem", api_version="v1beta", timeout=10_000),
    )
    result = await client.aio.models.embed_content(
        model="gem-emb",
        contents=["first", "second"],
        config=types.EmbedContentConfig(output_dimensionality=4, task_type="RETRIEVAL_DOCUMENT"),
    )
    assert result.embeddings is not None
    assert [e.values for e in result.embeddings] == [sim_vector("gem-emb", t, 4) for t in ("first", "second")]
    [entry] = await ctl.requests_async("gem", endpoint="embeddings")
    assert entry["key"] == "AIza-sdk" and len(entry["body"]["requests"]) == 2
