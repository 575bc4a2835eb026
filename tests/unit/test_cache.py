"""The response cache's pure parts: the header decision, the key, the stream recorder, the LRU + TTL
budget (on a real MemoryStore), and where the cache sits in the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from freellm.cache.control import CacheChoice, cache_choice
from freellm.cache.key import cache_key, eligible
from freellm.cache.recorder import StreamRecorder
from freellm.cache.store import ResponseCache
from freellm.compression import Compressor
from freellm.config import CacheConfig, Settings
from freellm.core.request import ChatRequest, parse_chat_request
from freellm.engine.pipeline.build import build_pipeline
from freellm.routing.catalog import Catalog
from freellm.routing.router import Router
from freellm.store.memory import MemoryStore

# ---- control --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enabled", "header", "cache_control", "expected"),
    [
        (False, None, None, CacheChoice.OFF),
        (True, None, None, CacheChoice.USE),
        (False, "on", None, CacheChoice.USE),
        (False, " FORCE ", None, CacheChoice.USE),
        (False, "yes", None, CacheChoice.USE),
        (False, "1", None, CacheChoice.USE),
        (False, "true", None, CacheChoice.USE),
        (False, "off", None, CacheChoice.OFF),  # nothing to bypass: no header either
        (True, "off", None, CacheChoice.BYPASS),
        (True, "No", None, CacheChoice.BYPASS),
        (True, "0", None, CacheChoice.BYPASS),
        (True, "false", None, CacheChoice.BYPASS),
        (True, "bypass", None, CacheChoice.BYPASS),
        (True, "skip", None, CacheChoice.BYPASS),
        (True, None, "no-store", CacheChoice.BYPASS),
        (True, None, "max-age=0, No-Cache", CacheChoice.BYPASS),
        (True, None, "max-age=0", CacheChoice.USE),
        (False, "on", "no-store", CacheChoice.BYPASS),
        (True, "garbage", None, CacheChoice.USE),
        (False, "garbage", None, CacheChoice.OFF),
        (True, "", None, CacheChoice.USE),
    ],
)
def test_cache_choice(enabled: bool, header: str | None, cache_control: str | None, expected: CacheChoice) -> None:
    assert cache_choice(enabled, header, cache_control) is expected


# ---- key ------------------------------------------------------------------------------------------------


def req(**fields: Any) -> ChatRequest:
    return parse_chat_request({"messages": [{"role": "user", "content": "hi"}], **fields})


def key(r: ChatRequest, **kw: str) -> str:
    args = {"surface": "chat", "variant": "", "compression": "none", **kw}
    return cache_key(r, **args)


def test_key_is_stable_and_ignores_field_order() -> None:
    a = parse_chat_request({"model": "auto", "temperature": 0.5, "messages": [{"role": "user", "content": "hi"}]})
    b = parse_chat_request({"messages": [{"content": "hi", "role": "user"}], "temperature": 0.5, "model": "auto"})
    assert key(a) == key(b)
    assert len(key(a)) == 64


def test_absent_model_is_auto() -> None:
    assert key(req()) == key(req(model="auto")) == key(req(model="")) != key(req(model="x/y"))


@pytest.mark.parametrize(
    "fields",
    [
        {"temperature": 0.3},
        {"top_p": 0.9},
        {"max_tokens": 10},
        {"stop": "x"},
        {"n": 2},
        {"seed": 1},
        {"presence_penalty": 1},
        {"frequency_penalty": 1},
        {"logit_bias": {"1": 2}},
        {"logprobs": True},
        {"top_logprobs": 3},
        {"reasoning_effort": "high"},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"response_format": {"type": "json_object"}},
        {"stream": True},
        {"stream": True, "stream_options": {"include_usage": True}},
        {"user": "someone"},
    ],
)
def test_every_knob_changes_the_key(fields: dict[str, Any]) -> None:
    assert key(req(**fields)) != key(req())


def test_surface_variant_and_compression_change_the_key() -> None:
    r = req()
    base = key(r)
    assert key(r, surface="anthropic") != base
    assert key(r, variant="model=claude") != base
    assert key(r, compression="lossless:abc") != base


def test_eligibility_by_temperature() -> None:
    assert eligible(req(), 1.0)
    assert eligible(req(temperature=1.0), 1.0)
    assert not eligible(req(temperature=1.5), 1.0)
    assert not eligible(req(temperature=0.1), 0.0)


# ---- recorder -------------------------------------------------------------------------------------------


def finish(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def test_recorder_keeps_a_complete_stream() -> None:
    rec = StreamRecorder(100)
    rec.chunks([{"choices": [{"index": 0, "delta": {"content": "a"}}]}], b"one")
    rec.chunks([finish("stop")], b"two")
    assert not rec.storable  # no terminator yet
    rec.end(b"[DONE]")
    assert rec.storable and rec.payload() == b"onetwo[DONE]"


@pytest.mark.parametrize("spoil", ["length", "error", "overflow"])
def test_recorder_refuses_unfit_streams(spoil: str) -> None:
    rec = StreamRecorder(10)
    rec.chunks([finish("length" if spoil == "length" else "stop")], b"x" * (20 if spoil == "overflow" else 2))
    if spoil == "error":
        rec.fail()
    rec.end(b"!")
    assert not rec.storable
    if spoil == "overflow":
        assert rec.payload() == b""  # nothing retained past the ceiling


# ---- the LRU + TTL budget -------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def make_cache(store: MemoryStore | None = None, **cfg: Any) -> tuple[ResponseCache, MemoryStore, Clock]:
    store = store or MemoryStore()
    clock = Clock()
    cache = ResponseCache(CacheConfig(enabled=True, **cfg), store, clock=clock)
    await cache.open()
    return cache, store, clock


async def test_put_get_counts_and_saves_tokens() -> None:
    cache, _, _ = await make_cache()
    assert await cache.get("k") is None
    await cache.put("k", "json", b'{"a":1}', content_type="application/json", tokens=12, route="p/m")
    hit = await cache.get("k")
    assert hit is not None and hit.body == b'{"a":1}' and hit.route == "p/m"
    assert cache.stats() == {"entries": {"json": 1, "stream": 0}, "hits": 1, "misses": 1, "tokens_saved": 12, "bytes": 7}


async def test_lru_evicts_least_recently_used_of_either_kind() -> None:
    cache, store, _ = await make_cache(max_entries=2)
    await cache.put("a", "json", b"A", content_type="application/json", tokens=1, route="r")
    await cache.put("b", "stream", b"B", content_type="text/event-stream", tokens=1, route="r")
    assert await cache.get("a") is not None  # a is now the most recent
    await cache.put("c", "json", b"C", content_type="application/json", tokens=1, route="r")
    assert await cache.get("b") is None and await cache.get("a") is not None
    await cache.put("d", "stream", b"D", content_type="text/event-stream", tokens=1, route="r")
    assert await cache.get("c") is None  # evicted: gone from the store too
    assert [k for k, _, _ in await store.load_cached(1000.0, 10)] == ["a"]


async def test_byte_budget_evicts() -> None:
    cache, _, _ = await make_cache(max_bytes=10)
    await cache.put("a", "stream", b"x" * 6, content_type="t", tokens=0, route="r")
    await cache.put("b", "stream", b"y" * 6, content_type="t", tokens=0, route="r")
    assert await cache.get("a") is None and await cache.get("b") is not None
    await cache.put("huge", "stream", b"z" * 11, content_type="t", tokens=0, route="r")  # never fits
    assert await cache.get("huge") is None and await cache.get("b") is not None


async def test_ttl_is_lazy_and_drops_persisted_bodies() -> None:
    cache, store, clock = await make_cache(ttl_s=10)
    await cache.put("a", "json", b"A", content_type="application/json", tokens=0, route="r")
    clock.now += 9.9
    assert await cache.get("a") is not None
    clock.now += 0.2
    assert await cache.get("a") is None
    assert await store.load_cached(0.0, 10) == []
    assert cache.stats()["entries"] == {"json": 0, "stream": 0}


async def test_json_bodies_reload_streams_do_not() -> None:
    store = MemoryStore()
    cache, _, _ = await make_cache(store)
    await cache.put("j", "json", "é".encode(), content_type="application/json", tokens=3, route="r")
    await cache.put("s", "stream", b"data: x\n\n", content_type="text/event-stream", tokens=3, route="r")
    again, _, _ = await make_cache(store)
    hit = await again.get("j")
    assert hit is not None and hit.body == "é".encode() and hit.tokens == 3
    assert await again.get("s") is None


async def test_replacing_a_json_entry_by_a_stream_forgets_the_body() -> None:
    cache, store, _ = await make_cache()
    await cache.put("k", "json", b"A", content_type="application/json", tokens=0, route="r")
    await cache.put("k", "stream", b"B", content_type="t", tokens=0, route="r")
    assert await store.load_cached(1000.0, 10) == []
    assert cache.stats()["entries"] == {"json": 0, "stream": 1}


async def test_clear() -> None:
    cache, store, _ = await make_cache()
    await cache.put("a", "json", b"A", content_type="application/json", tokens=0, route="r")
    await cache.put("b", "stream", b"B", content_type="t", tokens=0, route="r")
    assert await cache.clear() == 2
    assert cache.stats()["entries"] == {"json": 0, "stream": 0} and cache.stats()["bytes"] == 0
    assert await store.load_cached(1000.0, 10) == []


# ---- the pipeline's order -------------------------------------------------------------------------------


def pipeline_names(**settings: Any) -> tuple[str, ...]:
    s = Settings.model_validate(settings)
    router = Router(s, Catalog(s), {}, MemoryStore())
    cache = ResponseCache(s.cache, MemoryStore())
    compressor = Compressor(s.compression, filters_dir=Path("/nonexistent"))
    return build_pipeline(s, router, compressor=compressor, cache=cache).names  # no session memory given


def test_pipeline_order_and_off_means_absent() -> None:
    assert pipeline_names() == ("images", "gates", "cache")
    assert pipeline_names(compression={"mode": "lossless"}) == ("compress", "images", "gates", "cache")
    everything = pipeline_names(
        compression={"mode": "standard"},
        profiles={"team": {"system_prompt": "Be brief."}},
        limits={"request_max_tokens_budget": 10_000},
    )
    assert everything == ("compress", "profile", "images", "gates", "budget", "cache")
