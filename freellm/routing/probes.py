"""Background probes that bring keys back (spec/core.md §10, ``health`` settings).

* **Cooldown probe**, every ``health.cooldown_probe_s`` (P): a key cooling down on a *heuristic*
  cooldown (a guess, not the provider's own retry time) is checked once enough of the cooldown has
  passed — half of it, at most P — while enough is left to be worth it (min(60 s, P)). A passing check
  clears the cooldown (the ladder is kept, so a relapse escalates as before); a failing one backs off
  2, 4, 8, then 15 times P/60 minutes. At most three keys per pass; the first pass waits a random 0 to 0.75 P.
* **Key health pass**, every ``health.key_check_s`` (K) ±20 %: every enabled key is checked, keys
  interleaved across providers, at most ``health.concurrency`` at once and one check per provider per
  min(1 s, K/300). A key checked within 0.7 K is skipped unless it is in ``error`` or ``invalid``. The
  answers feed :class:`~freellm.routing.health.KeyHealth` (401/403 → invalid, three in a row →
  disabled; 2xx → healthy; no answer → unchanged).

The check is the provider's ``probe`` (``GET {base_url}/models``): no tokens, no quota. Either loop is
off with its interval at 0; both stop with the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass
from itertools import zip_longest

from freellm.config import HealthConfig
from freellm.routing.catalog import KeyRef
from freellm.routing.health import HEALTH_SETTING
from freellm.routing.router import Router
from freellm.store.base import StateStore

__all__ = ["Prober"]

log = logging.getLogger("freellm.probes")

_KEYS_PER_COOLDOWN_PASS = 3
_BACKOFF_MINUTES = (2.0, 4.0, 8.0, 15.0)
_HEURISTIC = "heuristic"


@dataclass(slots=True)
class _Watch:
    """What the cooldown probe remembers of one cooling key."""

    first_seen: float
    until: float
    next_probe: float
    failures: int = 0


class Prober:
    def __init__(self, cfg: HealthConfig, router: Router, store: StateStore, *, rng: random.Random | None = None) -> None:
        self._cfg = cfg
        self._router = router
        self._store = store
        self._rng = rng or random.Random()
        self._watch: dict[str, _Watch] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._cfg.cooldown_probe_s > 0:
            self._tasks.append(loop.create_task(self._cooldown_loop(), name="freellm-cooldown-probe"))
        if self._cfg.key_check_s > 0:
            self._tasks.append(loop.create_task(self._health_loop(), name="freellm-key-health"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # ---- the cooldown probe ----------------------------------------------------------------------------

    async def _cooldown_loop(self) -> None:
        period = self._cfg.cooldown_probe_s
        await asyncio.sleep(self._rng.uniform(0, 0.75 * period))
        while True:
            try:
                await self.cooldown_pass(time.time())
            except Exception:  # a probe pass must never take the gateway down
                log.exception("cooldown probe pass failed")
            await asyncio.sleep(period)

    async def cooldown_pass(self, now: float) -> int:
        """One pass; returns how many keys were probed."""
        period = self._cfg.cooldown_probe_s
        active = await self._store.active_cooldowns(now)
        cooling = {s: r for s, r in active.items() if r.source == _HEURISTIC and s.count("\x1f") == 2}
        for scope in [s for s in self._watch if s not in cooling]:
            del self._watch[scope]
        due: list[str] = []
        for scope, record in cooling.items():
            watch = self._watch.get(scope)
            if watch is None or record.until != watch.until:
                wait = min(0.5 * (record.until - now), period)
                watch = self._watch[scope] = _Watch(first_seen=now, until=record.until, next_probe=now + wait)
            if now >= watch.next_probe and record.until - now >= min(60.0, period):
                due.append(scope)
        due.sort(key=lambda s: self._watch[s].next_probe)
        probed = 0
        for scope in due[:_KEYS_PER_COOLDOWN_PASS]:
            provider, model, key_id = scope.split("\x1f")
            key = self._key(provider, key_id)
            if key is None:
                continue
            probed += 1
            status = await self._probe(provider, key)
            watch = self._watch[scope]
            if status is not None and 200 <= status < 300:
                await self._store.clear_cooldown(scope)
                del self._watch[scope]
                log.info("cooldown probe passed: %s/%s is back", provider, model)
            else:
                step = _BACKOFF_MINUTES[min(watch.failures, len(_BACKOFF_MINUTES) - 1)]
                watch.failures += 1
                watch.next_probe = now + step * period
        return probed

    # ---- the key health pass -----------------------------------------------------------------------------

    async def _health_loop(self) -> None:
        period = self._cfg.key_check_s
        while True:
            await asyncio.sleep(period * self._rng.uniform(0.8, 1.2))
            try:
                await self.health_pass(time.time())
            except Exception:
                log.exception("key health pass failed")

    async def health_pass(self, now: float, *, force: bool = False) -> int:
        """Check every enabled key (see the module doc); returns how many were checked."""
        period = self._cfg.key_check_s
        health = self._router.health
        catalog = self._router.catalog
        per_provider: list[list[tuple[str, KeyRef]]] = []
        for provider, keys in catalog.keys.items():
            due = []
            for key in keys:
                status = health.status(provider, key.key_id)
                if status == "disabled":
                    continue
                recent = now - health.checked_at(provider, key.key_id) < 0.7 * period
                if recent and not force and status not in ("error", "invalid"):
                    continue
                due.append((provider, key))
            if due:
                per_provider.append(due)
        order = [pair for row in zip_longest(*per_provider) for pair in row if pair is not None]
        if not order:
            return 0
        gap = min(1.0, period / 300.0)
        limit = asyncio.Semaphore(self._cfg.concurrency)
        started: dict[str, float] = {}
        """When the last check of each provider actually started (the gap is kept from that, not from
        a planned time: a loop that wakes late would otherwise start two planned checks together)."""
        turns = {provider: asyncio.Lock() for provider, _ in order}
        changed = False

        async def check(provider: str, key: KeyRef) -> None:
            nonlocal changed
            async with limit:
                loop = asyncio.get_running_loop()
                async with turns[provider]:
                    previous = started.get(provider)
                    if previous is not None:
                        while (wait := previous + gap - loop.time()) > 0:
                            await asyncio.sleep(wait)
                    started[provider] = loop.time()
                status = await self._probe(provider, key)
                if health.record_check(provider, key.key_id, status, now):
                    changed = True
                    log.info("key check: %s key %s is now %s", provider, key.key_id[:6], health.status(provider, key.key_id))

        await asyncio.gather(*(check(p, k) for p, k in order))
        if changed:
            await self._store.set_setting(HEALTH_SETTING, health.dump())
        return len(order)

    # ---- helpers -----------------------------------------------------------------------------------------

    def _key(self, provider: str, key_id: str) -> KeyRef | None:
        return next((k for k in self._router.catalog.keys.get(provider) or () if k.key_id == key_id), None)

    async def _probe(self, provider: str, key: KeyRef) -> int | None:
        timeout = min(30.0, max(1.0, max(self._cfg.key_check_s, self._cfg.cooldown_probe_s) / 10.0))
        return await self._router.provider(provider).probe(key.secret, timeout)
