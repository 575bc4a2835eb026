"""The prober's two passes, driven directly with explicit clocks: the cooldown probe (which cooldowns,
when, how many, clearing and back-off) and the key health pass (interleaving, skipping, re-checks,
disabling, pacing, persistence). Real store, catalog and router; only the providers' ``probe`` is faked."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from freellm.config import HealthConfig, Settings
from freellm.providers.base import Provider
from freellm.routing.catalog import Catalog, key_fingerprint
from freellm.routing.health import HEALTH_SETTING, KeyHealth
from freellm.routing.probes import Prober
from freellm.routing.router import Needs, Router, SkipSets
from freellm.store.base import CooldownRecord, key_scope, model_scope
from freellm.store.memory import MemoryStore

NOW = 1_700_000_000.0
MODEL = "m1"


@dataclass
class Call:
    provider: str
    secret: str
    timeout_s: float
    at: float
    """The event loop's clock when the probe started (for pacing)."""


@dataclass
class FakeProvider:
    """Stands in for the network: ``probe`` answers from a per-secret script (then ``default``)."""

    name: str
    log: list[Call]
    default: int | None = 200
    script: dict[str, list[int | None]] = field(default_factory=dict)

    async def probe(self, key: str, timeout_s: float) -> int | None:
        self.log.append(Call(self.name, key, timeout_s, asyncio.get_running_loop().time()))
        for _ in range(3):  # let other checks run meanwhile (no time passes)
            await asyncio.sleep(0)
        queue = self.script.get(key)
        return queue.pop(0) if queue else self.default


@dataclass
class Rig:
    settings: Settings
    store: MemoryStore
    catalog: Catalog
    router: Router
    prober: Prober
    fakes: dict[str, FakeProvider]
    log: list[Call]

    def scope(self, provider: str, secret: str, model: str = MODEL) -> str:
        return key_scope(provider, model, key_fingerprint(secret))

    def secrets(self, provider: str | None = None) -> list[str]:
        return [c.secret for c in self.log if provider is None or c.provider == provider]

    async def cool(self, provider: str, secret: str, until: float, source: str = "heuristic") -> str:
        scope = self.scope(provider, secret)
        await self.store.set_cooldown(scope, CooldownRecord(until=until, source=source, reason="test"))
        return scope


def make_rig(
    keys: dict[str, list[str]],
    *,
    cooldown_probe_s: float = 60.0,
    key_check_s: float = 0.3,
    concurrency: int = 8,
    disable_after: int = 3,
    disabled: Iterable[str] = (),
) -> Rig:
    settings = Settings.model_validate(
        {
            "providers": [
                {
                    "name": name,
                    "base_url": f"https://{name}.example/v1",
                    "keys": secrets,
                    "models": [{"id": MODEL}],
                    "enabled": name not in set(disabled),
                }
                for name, secrets in keys.items()
            ],
            "health": {
                "cooldown_probe_s": cooldown_probe_s,
                "key_check_s": key_check_s,
                "concurrency": concurrency,
                "disable_after": disable_after,
            },
        }
    )
    log: list[Call] = []
    fakes = {name: FakeProvider(name, log) for name in keys}
    store = MemoryStore()
    catalog = Catalog(settings)
    router = Router(settings, catalog, cast(dict[str, Provider], fakes), store, rng=random.Random(1))
    prober = Prober(settings.health, router, store, rng=random.Random(1))
    return Rig(settings, store, catalog, router, prober, fakes, log)


def test_health_config_is_what_the_settings_carry() -> None:
    cfg = HealthConfig(cooldown_probe_s=30, key_check_s=0.3)
    assert (cfg.cooldown_probe_s, cfg.key_check_s, cfg.concurrency, cfg.disable_after) == (30, 0.3, 8, 3)
    assert make_rig({"a": ["a1"]}, cooldown_probe_s=30).settings.health.cooldown_probe_s == 30


# ==== the cooldown probe ===============================================================================


async def test_only_heuristic_key_cooldowns_are_probed() -> None:
    rig = make_rig({"a": ["h", "auth", "learned", "retired", "credit"]})
    until = NOW + 3600
    kept = {
        await rig.cool("a", "auth", until, "authoritative"),
        await rig.cool("a", "learned", until, "learned"),
        await rig.cool("a", "retired", until, "retired"),
        await rig.cool("a", "credit", until, "credit"),
    }
    await rig.store.set_cooldown(model_scope("a", MODEL), CooldownRecord(until=until, source="heuristic"))
    await rig.cool("a", "h", until)
    assert await rig.prober.cooldown_pass(NOW) == 0  # first sight: nothing is due yet
    assert await rig.prober.cooldown_pass(NOW + 60) == 1
    assert rig.secrets() == ["h"]
    assert await rig.prober.cooldown_pass(NOW + 3000) == 0  # the others are never probed
    assert rig.secrets() == ["h"]
    active = await rig.store.active_cooldowns(NOW + 60)
    assert kept | {model_scope("a", MODEL)} == set(active)  # untouched; only "h" was cleared


async def test_not_probed_before_the_period_has_passed() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    await rig.cool("a", "k", NOW + 3600)  # half of it is 1800 s: the period (60 s) is the wait
    assert await rig.prober.cooldown_pass(NOW) == 0
    assert await rig.prober.cooldown_pass(NOW + 59.9) == 0
    assert rig.log == []
    assert await rig.prober.cooldown_pass(NOW + 60) == 1


async def test_not_probed_before_half_the_cooldown_has_passed() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=600)
    await rig.cool("a", "k", NOW + 400)  # half: 200 s, less than the period
    assert await rig.prober.cooldown_pass(NOW) == 0
    assert await rig.prober.cooldown_pass(NOW + 199) == 0
    assert await rig.prober.cooldown_pass(NOW + 200) == 1


async def test_the_wait_counts_from_when_the_probe_first_saw_the_cooldown() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    await rig.cool("a", "k", NOW + 3600)
    assert await rig.prober.cooldown_pass(NOW + 1000) == 0
    assert await rig.prober.cooldown_pass(NOW + 1059) == 0
    assert await rig.prober.cooldown_pass(NOW + 1060) == 1


async def test_not_probed_when_less_than_a_minute_is_left() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    await rig.cool("a", "k", NOW + 100)  # due after 50 s, when only 50 s (< 60) are left
    for t in (0, 50, 60, 99):
        assert await rig.prober.cooldown_pass(NOW + t) == 0
    assert rig.log == []


async def test_the_worth_it_margin_is_the_period_when_shorter_than_a_minute() -> None:
    rig = make_rig({"a": ["k", "short"]}, cooldown_probe_s=20)
    await rig.cool("a", "k", NOW + 100)  # due after 20 s with 80 s left: worth it
    await rig.cool("a", "short", NOW + 30)  # due after 15 s with 15 s (< 20) left: not
    assert await rig.prober.cooldown_pass(NOW) == 0
    assert await rig.prober.cooldown_pass(NOW + 15) == 0
    assert await rig.prober.cooldown_pass(NOW + 20) == 1
    assert rig.secrets() == ["k"]


async def test_exactly_the_margin_left_is_still_worth_it() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    await rig.cool("a", "k", NOW + 120)  # due after 60 s with exactly 60 s left
    await rig.prober.cooldown_pass(NOW)
    assert await rig.prober.cooldown_pass(NOW + 60) == 1


async def test_at_most_three_keys_per_pass_longest_due_first() -> None:
    secrets = [f"k{i}" for i in range(5)]
    rig = make_rig({"a": secrets}, cooldown_probe_s=60)
    rig.fakes["a"].default = 429
    # first seen one second apart, newest secret first: their due times are NOW + 60, + 61, ...
    for i, s in enumerate(reversed(secrets)):
        await rig.cool("a", s, NOW + 3600)
        assert await rig.prober.cooldown_pass(NOW + i) == 0
    assert await rig.prober.cooldown_pass(NOW + 100) == 3
    assert rig.secrets() == ["k4", "k3", "k2"]
    assert await rig.prober.cooldown_pass(NOW + 101) == 2  # the rest; the probed ones backed off
    assert rig.secrets() == ["k4", "k3", "k2", "k1", "k0"]
    assert await rig.prober.cooldown_pass(NOW + 102) == 0


async def test_a_passing_probe_clears_the_cooldown() -> None:
    rig = make_rig({"a": ["k", "other"]}, cooldown_probe_s=60)
    scope = await rig.cool("a", "k", NOW + 3600)
    route = rig.catalog.by_label[f"a/{MODEL}"]
    await rig.prober.cooldown_pass(NOW)
    assert await rig.prober.cooldown_pass(NOW + 60) == 1
    assert rig.log[0].secret == "k"
    assert await rig.store.get_cooldown(scope, NOW + 60) is None
    # the router serves from the key again
    check = await rig.router.check(
        route, Needs(estimate=10), SkipSets(keys={rig.scope("a", "other")}), NOW + 60
    )
    assert check.key is not None and check.key.secret == "k"
    # and the probe forgets it: nothing more to do
    assert await rig.prober.cooldown_pass(NOW + 120) == 0
    assert len(rig.log) == 1


@pytest.mark.parametrize("answer", [429, 500, 401, None])
async def test_a_failing_probe_keeps_the_cooldown(answer: int | None) -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    rig.fakes["a"].default = answer
    scope = await rig.cool("a", "k", NOW + 3600)
    await rig.prober.cooldown_pass(NOW)
    assert await rig.prober.cooldown_pass(NOW + 60) == 1
    record = await rig.store.get_cooldown(scope, NOW + 60)
    assert record is not None and record.until == NOW + 3600


@pytest.mark.parametrize("period", [60.0, 30.0])
async def test_failures_back_off_2_4_8_then_15_periods(period: float) -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=period)
    rig.fakes["a"].default = 429
    await rig.cool("a", "k", NOW + 100_000)
    await rig.prober.cooldown_pass(NOW)
    t = NOW + period
    assert await rig.prober.cooldown_pass(t) == 1
    for minutes in (2, 4, 8, 15, 15):  # minutes x P/60, i.e. that many periods
        wait = minutes * period
        assert await rig.prober.cooldown_pass(t + wait - 1) == 0, minutes
        t += wait
        assert await rig.prober.cooldown_pass(t) == 1, minutes
    assert len(rig.log) == 6


async def test_a_new_cooldown_starts_the_watch_over() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    rig.fakes["a"].default = 429
    await rig.cool("a", "k", NOW + 3600)
    await rig.prober.cooldown_pass(NOW)
    await rig.prober.cooldown_pass(NOW + 60)  # fails: next at NOW + 180
    await rig.prober.cooldown_pass(NOW + 180)  # fails: next at NOW + 420
    assert len(rig.log) == 2
    await rig.cool("a", "k", NOW + 7200)  # a relapse: a longer cooldown
    assert await rig.prober.cooldown_pass(NOW + 200) == 0  # seen afresh ...
    assert await rig.prober.cooldown_pass(NOW + 260) == 1  # ... so one period later, not at 420
    assert await rig.prober.cooldown_pass(NOW + 260 + 119) == 0  # and the back-off starts at 2 again
    assert await rig.prober.cooldown_pass(NOW + 260 + 120) == 1


async def test_an_ended_cooldown_is_forgotten() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    scope = await rig.cool("a", "k", NOW + 3600)
    await rig.prober.cooldown_pass(NOW)
    await rig.store.clear_cooldown(scope)  # e.g. a served request
    assert await rig.prober.cooldown_pass(NOW + 60) == 0
    await rig.cool("a", "k", NOW + 3600)  # the same until, seen again: the wait starts over
    assert await rig.prober.cooldown_pass(NOW + 61) == 0
    assert await rig.prober.cooldown_pass(NOW + 121) == 1


async def test_keys_no_longer_configured_are_not_probed() -> None:
    rig = make_rig({"a": ["k"]}, cooldown_probe_s=60)
    stale = key_scope("a", MODEL, key_fingerprint("removed"))
    await rig.store.set_cooldown(stale, CooldownRecord(until=NOW + 3600, source="heuristic"))
    await rig.store.set_cooldown(
        key_scope("gone", MODEL, key_fingerprint("k")), CooldownRecord(until=NOW + 3600, source="heuristic")
    )
    await rig.prober.cooldown_pass(NOW)
    assert await rig.prober.cooldown_pass(NOW + 60) == 0
    assert rig.log == []
    assert await rig.store.get_cooldown(stale, NOW + 60) is not None


async def test_the_cooldown_probe_uses_each_providers_own_probe() -> None:
    rig = make_rig({"a": ["ka"], "b": ["kb"]}, cooldown_probe_s=60, key_check_s=300)
    await rig.cool("a", "ka", NOW + 3600)
    await rig.cool("b", "kb", NOW + 3600)
    await rig.prober.cooldown_pass(NOW)
    assert await rig.prober.cooldown_pass(NOW + 60) == 2
    assert sorted((c.provider, c.secret) for c in rig.log) == [("a", "ka"), ("b", "kb")]
    assert {c.timeout_s for c in rig.log} == {30.0}  # max(K, P) / 10, at most 30 s


# ==== the key health pass ==============================================================================


async def test_every_key_is_checked_interleaved_across_providers() -> None:
    rig = make_rig({"a": ["a1", "a2", "a3"], "b": ["b1"], "c": ["c1", "c2"]}, concurrency=1)
    assert await rig.prober.health_pass(NOW) == 6
    assert rig.secrets() == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert all(
        rig.router.health.status(p, k.key_id) == "healthy" for p, ks in rig.catalog.keys.items() for k in ks
    )


async def test_the_probe_timeout_scales_with_the_intervals() -> None:
    rig = make_rig({"a": ["a1"]}, cooldown_probe_s=60, key_check_s=0.3)
    await rig.prober.health_pass(NOW)
    assert rig.log[0].timeout_s == 6.0  # max(K, P) / 10
    small = make_rig({"a": ["a1"]}, cooldown_probe_s=5, key_check_s=0.3)
    await small.prober.health_pass(NOW)
    assert small.log[0].timeout_s == 1.0  # at least a second


async def test_recently_checked_healthy_keys_are_skipped_unless_forced() -> None:
    rig = make_rig({"a": ["a1", "a2"], "b": ["b1"]}, key_check_s=0.3)  # skip window: 0.7 K = 0.21 s
    assert await rig.prober.health_pass(NOW) == 3
    assert await rig.prober.health_pass(NOW + 0.2) == 0
    assert len(rig.log) == 3
    assert await rig.prober.health_pass(NOW + 0.2, force=True) == 3
    assert len(rig.log) == 6
    assert await rig.prober.health_pass(NOW + 0.3) == 0  # the forced pass counts as a check
    assert await rig.prober.health_pass(NOW + 0.2 + 0.21) == 3  # 0.7 K after the last check


async def test_unanswered_checks_count_as_checked() -> None:
    rig = make_rig({"a": ["a1"]})
    rig.fakes["a"].default = None
    assert await rig.prober.health_pass(NOW) == 1
    assert rig.router.health.status("a", key_fingerprint("a1")) == "unknown"
    assert await rig.prober.health_pass(NOW + 0.1) == 0  # unknown, checked recently: skipped
    assert await rig.prober.health_pass(NOW + 0.21) == 1


async def test_invalid_and_error_keys_are_rechecked_every_pass() -> None:
    rig = make_rig({"a": ["good", "bad", "flaky"]}, concurrency=1)
    rig.fakes["a"].script = {"bad": [401, 401]}
    assert await rig.prober.health_pass(NOW) == 3
    health = rig.router.health
    assert health.status("a", key_fingerprint("bad")) == "invalid"
    health.mark_error("a", key_fingerprint("flaky"), "HTTP 500 while serving")
    assert await rig.prober.health_pass(NOW + 0.01) == 2  # the healthy one is skipped
    assert rig.secrets()[3:] == ["bad", "flaky"]
    assert health.status("a", key_fingerprint("flaky")) == "healthy"
    assert health.status("a", key_fingerprint("bad")) == "invalid"


async def test_three_rejections_disable_and_a_disabled_key_is_never_checked_again() -> None:
    rig = make_rig({"a": ["bad", "good"]}, concurrency=1)
    rig.fakes["a"].script = {"bad": [401, 403, 401, 200]}
    health = rig.router.health
    bad = key_fingerprint("bad")
    expected = ["invalid", "invalid", "disabled"]
    for i, status in enumerate(expected):
        await rig.prober.health_pass(NOW + i * 0.01)
        assert health.status("a", bad) == status
    assert rig.secrets().count("bad") == 3
    assert await rig.prober.health_pass(NOW + 10, force=True) == 1  # only "good"
    assert await rig.prober.health_pass(NOW + 20) == 1
    assert rig.secrets().count("bad") == 3
    assert health.status("a", bad) == "disabled"
    # the router no longer serves from it
    route = rig.catalog.by_label[f"a/{MODEL}"]
    check = await rig.router.check(
        route, Needs(estimate=10), SkipSets(keys={rig.scope("a", "good")}), NOW + 20
    )
    assert check.key is None
    assert [d.kind for d in check.diagnostics] == ["key_disabled"]


async def test_disable_after_follows_the_settings() -> None:
    rig = make_rig({"a": ["bad"]}, disable_after=1)
    rig.fakes["a"].default = 401
    await rig.prober.health_pass(NOW)
    assert rig.router.health.status("a", key_fingerprint("bad")) == "disabled"


async def test_statuses_are_persisted_in_the_store() -> None:
    rig = make_rig({"a": ["good", "bad"], "b": ["b1"]})
    rig.fakes["a"].script = {"bad": [401]}
    assert await rig.store.get_setting(HEALTH_SETTING) is None
    await rig.prober.health_pass(NOW)
    raw = await rig.store.get_setting(HEALTH_SETTING)
    assert raw == rig.router.health.dump()
    restored = KeyHealth()
    restored.load(raw)
    assert restored.status("a", key_fingerprint("good")) == "healthy"
    assert restored.status("a", key_fingerprint("bad")) == "invalid"
    assert restored.status("b", key_fingerprint("b1")) == "healthy"
    assert restored.checked_at("b", key_fingerprint("b1")) == NOW
    # a restarted router picks them up
    again = Router(rig.settings, rig.catalog, cast(dict[str, Provider], rig.fakes), rig.store)
    await again.restore(NOW + 1)
    assert again.health.status("a", key_fingerprint("bad")) == "invalid"


async def test_nothing_is_written_when_nothing_changed() -> None:
    rig = make_rig({"a": ["k"]})
    rig.fakes["a"].default = None  # no answer: unchanged
    await rig.prober.health_pass(NOW)
    assert await rig.store.get_setting(HEALTH_SETTING) is None
    rig.fakes["a"].default = 200
    await rig.prober.health_pass(NOW + 1)
    first = await rig.store.get_setting(HEALTH_SETTING)
    assert first is not None
    await rig.store.set_setting(HEALTH_SETTING, "sentinel")
    await rig.prober.health_pass(NOW + 2)  # healthy again: no change, no write
    assert await rig.store.get_setting(HEALTH_SETTING) == "sentinel"


async def test_no_keys_no_checks() -> None:
    rig = make_rig({"a": ["a1"], "off": ["o1"]}, disabled=["off"])
    assert rig.catalog.keys["off"] == []
    assert await rig.prober.health_pass(NOW) == 1
    assert rig.secrets() == ["a1"]
    empty = make_rig({"a": []})
    assert await empty.prober.health_pass(NOW, force=True) == 0
    assert empty.log == []


@pytest.mark.parametrize(("concurrency", "most"), [(1, 1), (2, 2), (8, 4)])
async def test_at_most_concurrency_checks_at_once(concurrency: int, most: int) -> None:
    rig = make_rig({"a": ["a1"], "b": ["b1"], "c": ["c1"], "d": ["d1"]}, concurrency=concurrency)
    counter = SharedCounter()
    for fake in rig.fakes.values():
        counter.wrap(fake)
    assert await rig.prober.health_pass(NOW) == 4
    assert counter.max == most


async def test_checks_of_one_provider_are_paced() -> None:
    rig = make_rig({"a": ["a1", "a2", "a3"], "b": ["b1", "b2", "b3"]}, key_check_s=0.3)  # gap: 1 ms
    assert await rig.prober.health_pass(NOW) == 6
    for provider in ("a", "b"):
        times = [c.at for c in rig.log if c.provider == provider]
        assert len(times) == 3
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(g >= 0.001 - 1e-6 for g in gaps), gaps
    # different providers are not paced against each other: b's first check does not wait for a's gap
    first_a, first_b = (next(c.at for c in rig.log if c.provider == p) for p in ("a", "b"))
    assert abs(first_b - first_a) < 0.001


# ==== start and stop ===================================================================================


async def test_start_and_stop_the_loops() -> None:
    rig = make_rig({"a": ["a1"]}, cooldown_probe_s=60, key_check_s=300)
    rig.prober.start()
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert {"freellm-cooldown-probe", "freellm-key-health"} <= names
    await rig.prober.stop()
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert not {"freellm-cooldown-probe", "freellm-key-health"} & names
    assert rig.log == []  # both loops wait before their first pass
    await rig.prober.stop()  # idempotent


async def test_intervals_of_zero_start_nothing() -> None:
    rig = make_rig({"a": ["a1"]}, cooldown_probe_s=0, key_check_s=0)
    before = len(asyncio.all_tasks())
    rig.prober.start()
    assert len(asyncio.all_tasks()) == before
    await rig.prober.stop()


class SharedCounter:
    """Counts probes in flight across every provider it wraps."""

    def __init__(self) -> None:
        self.now = 0
        self.max = 0

    def wrap(self, fake: FakeProvider) -> None:
        inner = fake.probe

        async def probe(key: str, timeout_s: float) -> int | None:
            self.now += 1
            self.max = max(self.max, self.now)
            try:
                return await inner(key, timeout_s)
            finally:
                self.now -= 1

        cast(Any, fake).probe = probe
