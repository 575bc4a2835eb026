"""One :class:`StateStore` made of two: *hot state* in one backend and *durable records* in another.

A fleet of replicas shares its hot state — what the router reads on every request (rate windows,
leases, cooldowns, events, sessions, cache entries) — in Redis, and its durable records — the request
log, stored Responses objects, settings (the admin API's overlay, the encrypted keys) — in PostgreSQL
(docs/deployment.md). Either may be configured alone, the other half then staying local, so the
composite forwards each operation to the half that owns it and the engine never knows which it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from freellm.store.base import (
    Analytics,
    CooldownRecord,
    LeaseAttempt,
    RequestLogRow,
    StateStore,
    StatusFilter,
    UsageSnapshot,
    shares_hot_state,
    store_health,
)

if TYPE_CHECKING:
    from freellm.config import ModelLimits

__all__ = ["CompositeStore"]


class CompositeStore:
    """``hot`` answers the hot-state operations, ``records`` the durable ones (see the module)."""

    def __init__(self, hot: StateStore, records: StateStore) -> None:
        self.hot = hot
        self.records = records
        self.shared_hot_state = shares_hot_state(hot)

    # -- lifecycle: both halves ----------------------------------------------------------------------
    async def open(self) -> None:
        await self.records.open()
        try:
            await self.hot.open()
        except BaseException:
            await self.records.close()
            raise

    async def close(self) -> None:
        try:
            await self.hot.close()
        finally:
            await self.records.close()

    async def flush(self) -> None:
        await asyncio.gather(self.hot.flush(), self.records.flush())

    def health(self) -> dict[str, str]:
        """What is degraded (``{"state": "local"}``, ``{"records": "buffering"}``), merged; {} when all is well."""
        return {**store_health(self.hot), **store_health(self.records)}

    # -- hot state -----------------------------------------------------------------------------------
    async def get_cooldown(self, scope: str, now: float) -> CooldownRecord | None:
        return await self.hot.get_cooldown(scope, now)

    async def set_cooldown(self, scope: str, record: CooldownRecord) -> None:
        await self.hot.set_cooldown(scope, record)

    async def clear_cooldown(self, scope: str) -> None:
        await self.hot.clear_cooldown(scope)

    async def active_cooldowns(self, now: float) -> dict[str, CooldownRecord]:
        return await self.hot.active_cooldowns(now)

    async def usage(self, scope: str, now: float) -> UsageSnapshot:
        return await self.hot.usage(scope, now)

    async def record_usage(self, scope: str, tokens: int, now: float) -> None:
        await self.hot.record_usage(scope, tokens, now)

    async def acquire_lease(self, scope: str, tokens: int, now: float, ttl_s: float) -> str:
        return await self.hot.acquire_lease(scope, tokens, now, ttl_s)

    async def acquire_lease_within(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits
    ) -> tuple[str | None, UsageSnapshot]:
        return await self.hot.acquire_lease_within(scope, tokens, now, ttl_s, limits)

    async def acquire_route_lease(
        self, scope: str, tokens: int, now: float, ttl_s: float, limits: ModelLimits, cooling: tuple[str, ...]
    ) -> LeaseAttempt:
        return await self.hot.acquire_route_lease(scope, tokens, now, ttl_s, limits, cooling)

    async def release_lease(self, scope: str, lease_id: str) -> None:
        await self.hot.release_lease(scope, lease_id)

    def batch(self) -> AbstractAsyncContextManager[None]:
        return self.hot.batch()

    async def settle_lease(self, scope: str, lease_id: str, tokens: int, now: float, clear: tuple[str, ...]) -> None:
        await self.hot.settle_lease(scope, lease_id, tokens, now, clear)

    async def lease_count(self) -> int:
        return await self.hot.lease_count()

    async def add_event(self, name: str, scope: str, now: float, window_s: float) -> int:
        return await self.hot.add_event(name, scope, now, window_s)

    async def count_events(self, name: str, scope: str, now: float, window_s: float) -> int:
        return await self.hot.count_events(name, scope, now, window_s)

    async def clear_events(self, name: str, scope: str) -> None:
        await self.hot.clear_events(name, scope)

    async def get_session(self, key: str, now: float) -> dict[str, Any] | None:
        return await self.hot.get_session(key, now)

    async def put_session(self, key: str, doc: dict[str, Any], expires_at: float, max_sessions: int) -> None:
        await self.hot.put_session(key, doc, expires_at, max_sessions)

    async def put_cached(self, key: str, doc: dict[str, Any], expires_at: float) -> None:
        await self.hot.put_cached(key, doc, expires_at)

    async def delete_cached(self, keys: list[str]) -> None:
        await self.hot.delete_cached(keys)

    async def clear_cached(self) -> None:
        await self.hot.clear_cached()

    async def load_cached(self, now: float, limit: int) -> list[tuple[str, float, dict[str, Any]]]:
        return await self.hot.load_cached(now, limit)

    async def get_cached(self, key: str, now: float) -> tuple[float, dict[str, Any]] | None:
        return await self.hot.get_cached(key, now)

    # -- durable records -----------------------------------------------------------------------------
    async def log_request(self, row: RequestLogRow) -> None:
        await self.records.log_request(row)

    async def recent_requests(self, limit: int = 100) -> list[RequestLogRow]:
        return await self.records.recent_requests(limit)

    async def query_requests(
        self, *, limit: int, status: StatusFilter | None, route: str | None, since: float | None
    ) -> list[RequestLogRow]:
        return await self.records.query_requests(limit=limit, status=status, route=route, since=since)

    async def request_analytics(self, since: float, now: float) -> Analytics:
        return await self.records.request_analytics(since, now)

    async def get_setting(self, name: str) -> str | None:
        return await self.records.get_setting(name)

    async def set_setting(self, name: str, value: str) -> None:
        await self.records.set_setting(name, value)

    async def refresh_settings(self, names: Collection[str]) -> dict[str, str]:
        return await self.records.refresh_settings(names)

    async def put_response(self, response_id: str, doc: dict[str, Any], expires_at: float) -> None:
        await self.records.put_response(response_id, doc, expires_at)

    async def get_response(self, response_id: str, now: float) -> dict[str, Any] | None:
        return await self.records.get_response(response_id, now)

    async def delete_response(self, response_id: str, now: float) -> bool:
        return await self.records.delete_response(response_id, now)

