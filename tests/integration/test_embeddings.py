"""Over the wire: embeddings through the gateway on the simulator — ``/v1/embeddings`` with the official
``openai`` SDK, Gemini's ``:embedContent``/``:batchEmbedContents`` with ``google-genai``, and Ollama's
``/api/embed`` and ``/api/embeddings`` with the ``ollama`` client (docs/embeddings.md)."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import ollama
import openai
import pytest
from google import genai
from google.genai import types

from freellm.sim import SimServer
from freellm.sim.control import SimControl
from freellm.sim.embeddings import sim_vector
from tests.harness import CLIENT_KEY, BackgroundLoop, GatewayServer, gateway_settings, start_gateway, unique
from tests.integration.helpers import AUTH, MODEL, sdk

ADMIN_KEY = "sk-admin-embeddings"
SIM_DIMENSIONS = 8
"""The simulator's default vector length."""

Member = tuple[str, str, str, str]
"""(provider, wire kind, model id, family)."""
MakeEmbedding = Callable[..., GatewayServer]


@pytest.fixture
def make_embedding_gateway(servers_loop: BackgroundLoop, sim: SimServer, tmp_path: Path) -> Iterator[MakeEmbedding]:
    """``make(members, **settings)``: a gateway with one chat route and the embedding ``members``, each
    provider on the simulator with its own wire (``openai`` or ``gemini``)."""
    started: list[GatewayServer] = []

    def factory(members: list[Member], **kwargs: Any) -> GatewayServer:
        chat = unique("chat")
        providers: dict[str, list[str]] = {chat: [MODEL]}
        options: dict[str, dict[str, Any]] = {}
        for provider, _, model, family in members:
            providers.setdefault(provider, []).append(model)
            options[f"{provider}/{model}"] = {"kind": "embedding", "family": family}
        extra = {"auth": {"admin_keys": [ADMIN_KEY]}, **kwargs.pop("extra", {})}
        settings = gateway_settings(
            tmp_path / f"gw{len(started)}",
            sim.base_url,
            providers,
            chain=[f"{chat}/{MODEL}"],
            model_options=options,
            extra=extra,
            **kwargs,
        )
        kinds = {provider: kind for provider, kind, _, _ in members}
        settings.providers = [
            p.model_copy(update={"kind": "gemini", "base_url": f"{sim.base_url}/{p.name}/v1beta"})
            if kinds.get(p.name) == "gemini"
            else p
            for p in settings.providers
        ]
        gw = start_gateway(servers_loop, settings)
        started.append(gw)
        return gw

    yield factory
    for gw in started:
        gw.close()


def seen(sim_control: SimControl, provider: str) -> list[dict[str, Any]]:
    return sim_control.requests(provider=provider, endpoint="embeddings")


def vectors(model: str, texts: list[str], dims: int = SIM_DIMENSIONS) -> list[list[float]]:
    return [sim_vector(model, t, dims) for t in texts]


def close(a: list[float], b: list[float]) -> bool:
    """float32 round trip (base64) keeps ~7 digits."""
    return len(a) == len(b) and all(abs(x - y) < 1e-6 for x, y in zip(a, b, strict=True))


# ---- /v1/embeddings -----------------------------------------------------------------------------------


def test_openai_sdk_gets_float_and_base64_vectors(make_embedding_gateway: MakeEmbedding, sim_control: SimControl) -> None:
    a = unique("emb")
    gw = make_embedding_gateway([(a, "openai", "te-small", "te")])
    client = sdk(gw)
    texts = ["alpha", "beta"]
    floats = client.embeddings.create(model="te", input=texts, encoding_format="float")
    assert [d.embedding for d in floats.data] == vectors("te-small", texts)
    assert [d.index for d in floats.data] == [0, 1] and floats.model == "te"
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 0
    # the SDK's default asks for base64 and decodes it itself
    default = client.embeddings.create(model="te", input="alpha")
    assert close(default.data[0].embedding, vectors("te-small", ["alpha"])[0])
    raw = httpx.post(
        f"{gw.v1}/embeddings", json={"model": "te", "input": "alpha", "encoding_format": "base64"}, headers=AUTH
    )
    assert raw.status_code == 200 and raw.headers["x-routed-via"] == f"{a}/te-small"
    packed = base64.b64decode(raw.json()["data"][0]["embedding"])
    assert close(list(struct.unpack(f"<{SIM_DIMENSIONS}f", packed)), vectors("te-small", ["alpha"])[0])
    sent = seen(sim_control, a)
    assert len(sent) == 3 and all(s["body"]["encoding_format"] == "float" for s in sent)


def test_failover_stays_in_the_family_and_crosses_wires(
    make_embedding_gateway: MakeEmbedding, sim_control: SimControl
) -> None:
    a, b = unique("emb-a"), unique("emb-b")
    gw = make_embedding_gateway([(a, "openai", "te-small", "te"), (b, "gemini", "te-mirror", "te")])
    sim_control.script(a, {"status": 500}, endpoint="embeddings")
    reply = sdk(gw).embeddings.create(model="te", input=["one", "two"], dimensions=4, encoding_format="float")
    assert [d.embedding for d in reply.data] == vectors("te-mirror", ["one", "two"], 4)
    [first] = seen(sim_control, a)
    [second] = seen(sim_control, b)
    assert first["body"]["dimensions"] == 4
    assert [r["outputDimensionality"] for r in second["body"]["requests"]] == [4, 4]
    assert [r["model"] for r in second["body"]["requests"]] == ["models/te-mirror"] * 2


def test_a_failing_family_never_borrows_another_familys_vectors(
    make_embedding_gateway: MakeEmbedding, sim_control: SimControl
) -> None:
    a, b = unique("emb-a"), unique("emb-b")
    gw = make_embedding_gateway([(a, "openai", "te-small", "te"), (b, "openai", "other-embed", "other")])
    sim_control.script(a, {"status": 503}, endpoint="embeddings")
    with pytest.raises(openai.APIStatusError) as err:
        sdk(gw).embeddings.create(model="te", input="x", encoding_format="float")
    assert err.value.status_code in (502, 503)
    assert len(seen(sim_control, a)) == 1 and seen(sim_control, b) == []
    # the other family still serves, and a pin goes to its one route
    assert sdk(gw).embeddings.create(model=f"{b}/other-embed", input="x", encoding_format="float").model == "other"


def test_unknown_models_chat_models_and_bad_bodies_are_refused_without_an_upstream_call(
    make_embedding_gateway: MakeEmbedding, sim_control: SimControl
) -> None:
    a = unique("emb")
    gw = make_embedding_gateway([(a, "openai", "te-small", "te")])
    with pytest.raises(openai.NotFoundError) as err:
        sdk(gw).embeddings.create(model="no-such-family", input="x")
    assert err.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        sdk(gw).embeddings.create(model=MODEL, input="x")  # a chat model
    # and a chat request naming an embedding family is told where to go
    chat = httpx.post(f"{gw.v1}/chat/completions", json={"model": "te", "messages": [{"role": "user", "content": "x"}]}, headers=AUTH)
    assert chat.status_code == 404 and "/v1/embeddings" in chat.json()["error"]["message"]
    for bad in ({"model": "te"}, {"model": "te", "input": [""]}, {"model": "te", "input": "x", "dimensions": "8"}, [1, 2]):
        resp = httpx.post(f"{gw.v1}/embeddings", json=bad, headers=AUTH)
        assert resp.status_code == 400 and resp.json()["error"]["type"] == "invalid_request_error"
    assert httpx.post(f"{gw.v1}/embeddings", json={"model": "te", "input": "x"}).status_code == 401
    assert seen(sim_control, a) == []


def test_token_input_goes_only_to_openai_wire_members(make_embedding_gateway: MakeEmbedding, sim_control: SimControl) -> None:
    a, g = unique("emb-a"), unique("emb-g")
    gw = make_embedding_gateway([(g, "gemini", "gm-embed", "gm"), (a, "openai", "te-small", "te")])
    reply = sdk(gw).embeddings.create(model="te", input=[[101, 102]], encoding_format="float")
    assert len(reply.data[0].embedding) == SIM_DIMENSIONS
    assert seen(sim_control, a)[0]["body"]["input"] == [[101, 102]]
    resp = httpx.post(f"{gw.v1}/embeddings", json={"model": "gm", "input": [1, 2, 3]}, headers=AUTH)
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "input"
    assert seen(sim_control, g) == []


def test_models_listing_and_request_log(make_embedding_gateway: MakeEmbedding, sim_control: SimControl) -> None:
    a = unique("emb")
    gw = make_embedding_gateway([(a, "openai", "te-small", "te")])
    listed = {m.id: m for m in sdk(gw).models.list().data}
    assert (listed["te"].model_extra or {}).get("kind") == "embedding"
    assert "kind" not in (listed[MODEL].model_extra or {})
    sdk(gw).embeddings.create(model="te", input="logged", encoding_format="float")
    rows = httpx.get(f"{gw.base_url}/admin/requests", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()
    [row] = [r for r in rows["data"] if r["surface"] == "embeddings"]
    assert row["route"] == f"{a}/te-small" and row["status"] == 200 and row["tokens_in"] > 0


# ---- Gemini's embedContent and batchEmbedContents ---------------------------------------------------------


def test_google_genai_embeds_through_the_gemini_routes(make_embedding_gateway: MakeEmbedding, sim_control: SimControl) -> None:
    a = unique("emb")
    gw = make_embedding_gateway([(a, "openai", "text-embedding-004", "te")])
    client = genai.Client(
        api_key=CLIENT_KEY, http_options=types.HttpOptions(base_url=gw.base_url, api_version="v1beta", timeout=15_000)
    )
    result = client.models.embed_content(
        model="text-embedding-004", contents=["first", "second"], config=types.EmbedContentConfig(output_dimensionality=4)
    )
    assert [e.values for e in result.embeddings or []] == vectors("text-embedding-004", ["first", "second"], 4)
    one = httpx.post(
        f"{gw.base_url}/v1beta/models/te:embedContent",
        json={"content": {"parts": [{"text": "solo"}]}},
        headers={"x-goog-api-key": CLIENT_KEY},
    )
    assert one.status_code == 200 and one.json() == {"embedding": {"values": vectors("text-embedding-004", ["solo"])[0]}}
    missing = httpx.post(
        f"{gw.base_url}/v1beta/models/nope:embedContent",
        json={"content": {"parts": [{"text": "x"}]}},
        headers={"x-goog-api-key": CLIENT_KEY},
    )
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    assert len(seen(sim_control, a)) == 2


# ---- Ollama's /api/embed and /api/embeddings ------------------------------------------------------------


def test_ollama_client_embeds(make_embedding_gateway: MakeEmbedding, sim_control: SimControl) -> None:
    a, b = unique("emb-a"), unique("emb-b")
    gw = make_embedding_gateway([(a, "openai", "nomic", "nomic-embed-text"), (b, "openai", "nomic-2", "nomic-embed-text")])
    sim_control.script(a, {"status": 429, "retry_after": "30"}, endpoint="embeddings")
    client = ollama.Client(host=gw.base_url, timeout=15)
    result = client.embed(model="nomic-embed-text:latest", input=["x", "y"])
    assert [list(v) for v in result.embeddings] == vectors("nomic-2", ["x", "y"])
    assert result.model == "nomic-embed-text:latest" and (result.prompt_eval_count or 0) > 0
    legacy = client.embeddings(model="nomic-embed-text", prompt="x")
    assert list(legacy.embedding) == vectors("nomic-2", ["x"])[0]
    # a load call (no input) never reaches an upstream; a wrong type is Ollama's 400
    load = httpx.post(f"{gw.base_url}/api/embed", json={"model": "nomic-embed-text"})
    assert load.status_code == 200 and load.json()["embeddings"] == []
    bad = httpx.post(f"{gw.base_url}/api/embed", json={"model": "nomic-embed-text", "input": 5})
    assert bad.status_code == 400 and isinstance(bad.json()["error"], str)
    tags = [m.model for m in client.list().models]
    assert "nomic-embed-text" in tags
    assert client.show("nomic-embed-text").capabilities == ["embedding"]
    assert len(seen(sim_control, a)) == 1 and len(seen(sim_control, b)) == 2
