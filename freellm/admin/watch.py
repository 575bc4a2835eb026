"""Picking up what another process wrote: ``freellm keys … --config``, another worker's or replica's admin
API, and what routing learned elsewhere (key health, limits read from headers).

The admin API changes the running gateway in memory and persists the change as two store settings —
the encrypted keys (``provider_keys``) and the overlay (``admin_overlay``). Other processes sharing the
data directory write the same settings: the CLI acting on the data directory while the gateway runs,
and the other workers of ``serve --workers N``, each with its own memory. :class:`SettingsWatcher`
re-reads them every :data:`WATCH_INTERVAL_S` (one small query) and, when another process changed one,
reloads it and moves this gateway onto the new effective settings — so a change made anywhere is
served everywhere within a few seconds, with no restart (docs/cli.md promises 5 s). Key health and
learned limits, which every process writes as it learns them, are merged into this router the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from freellm.admin.live import OVERLAY_SETTING, RuntimeKey, apply_settings
from freellm.routing.health import HEALTH_SETTING
from freellm.routing.learned import LEARNED_SETTING
from freellm.secrets import SETTING_NAME as KEYS_SETTING

if TYPE_CHECKING:
    from freellm.server.state import Gateway

__all__ = ["WATCHED_SETTINGS", "WATCH_INTERVAL_S", "SettingsWatcher"]

log = logging.getLogger("freellm.admin")

WATCH_INTERVAL_S: Final = 1.0
"""How often the settings are re-read: well inside the 5 s the CLI promises, and a query this small
(two rows by primary key, on the store's reader thread) costs nothing measurable."""
WATCHED_SETTINGS: Final = (KEYS_SETTING, OVERLAY_SETTING, HEALTH_SETTING, LEARNED_SETTING)
"""The configuration the admin API writes, and what routing learned that the fleet should share: key
health (a key found invalid is skipped everywhere) and the limits read from providers' headers."""


class SettingsWatcher:
    """The background task that applies configuration written by other processes (see the module)."""

    def __init__(self, gw: Gateway, interval_s: float = WATCH_INTERVAL_S) -> None:
        self._gw = gw
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="freellm-settings-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def check(self) -> bool:
        """Re-read the settings once and apply what another process changed; True when something was."""
        gw = self._gw
        live = gw.live
        if live is None or gw.shutting_down:
            return False
        changed = await gw.store.refresh_settings(WATCHED_SETTINGS)
        if not changed:
            return False
        router = gw.router
        if HEALTH_SETTING in changed:
            router.health.load(changed[HEALTH_SETTING])
        if LEARNED_SETTING in changed:
            router.learned.load(changed[LEARNED_SETTING], gw.catalog.by_label)
        if OVERLAY_SETTING not in changed and KEYS_SETTING not in changed:
            return True
        if OVERLAY_SETTING in changed:
            await live.load()
        if KEYS_SETTING in changed and gw.vault is not None:
            keys = await gw.vault.load()
            live.runtime_keys = [RuntimeKey(k.id, k.provider, k.secret, k.enabled) for k in keys]
        await apply_settings(gw, live.effective_or_base())
        log.info("applied configuration changed by another process (%s)", ", ".join(sorted(changed)))
        return True

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a damaged setting or a busy file: keep serving, say why, try again
                log.error("could not apply configuration changed by another process: %s", exc)
