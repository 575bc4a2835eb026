"""``ResponseCache``: one LRU + TTL budget shared by stored JSON bodies and stored stream replays.

Memory holds every live entry (a hit is a dictionary lookup). JSON bodies are also written through the
``StateStore`` (write-behind on the default SQLite store) and loaded back at start-up, so they survive a
restart; streams live in memory only — unless the store's hot state is shared by a fleet (Redis), when
streams are written there too and a miss here asks the store, so an answer one replica stored is a hit
on every other. Expiry is lazy: an entry past its TTL is dropped when it is next
looked up (and whenever the LRU makes room). ``max_entries`` and ``max_bytes`` bound the whole cache —
the least recently used entry of either kind goes first.

Statistics (hits, misses, tokens saved) are this process's, since start-up.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from freellm.config import CacheConfig
from freellm.store.base import StateStore, shares_hot_state

__all__ = ["CachedReply", "ResponseCache"]

log = logging.getLogger("freellm.cache")

Kind = Literal["json", "stream"]


@dataclass(frozen=True, slots=True)
class CachedReply:
    kind: Kind
    body: bytes
    """The exact bytes the client got: a JSON body, or every stream frame through the terminator."""
    content_type: str
    tokens: int
    """Prompt + completion tokens the original answer cost (what each hit saves)."""
    route: str
    """The route that answered originally (for the request log)."""
    expires_at: float

    def doc(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "body": self.body.decode("utf-8", "surrogateescape"),
            "content_type": self.content_type,
            "tokens": self.tokens,
            "route": self.route,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any], expires_at: float) -> CachedReply | None:
        try:
            kind = doc.get("kind", "json")
            if kind not in ("json", "stream"):
                return None
            return cls(
                kind=kind,
                body=str(doc["body"]).encode("utf-8", "surrogateescape"),
                content_type=str(doc.get("content_type") or "application/json"),
                tokens=int(doc.get("tokens") or 0),
                route=str(doc.get("route") or ""),
                expires_at=expires_at,
            )
        except (KeyError, TypeError, ValueError):
            return None


class ResponseCache:
    def __init__(self, config: CacheConfig, store: StateStore, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._store = store
        self._clock = clock
        self._entries: OrderedDict[str, CachedReply] = OrderedDict()
        """key → entry, least recently used first."""
        self._bytes = 0
        self._counts = {"json": 0, "stream": 0}
        self.hits = 0
        self.misses = 0
        self.tokens_saved = 0
        self._shared = shares_hot_state(store)

    async def open(self) -> None:
        """Load the persisted JSON bodies (newest ``max_entries``) into the LRU."""
        now = self._clock()
        for key, expires_at, doc in await self._store.load_cached(now, self.config.max_entries):
            reply = CachedReply.from_doc(doc, expires_at)
            if reply is None:
                log.warning("response cache: ignoring a stored entry that cannot be read")
                continue
            self._insert(key, reply)
        await self._make_room()

    async def get(self, key: str) -> CachedReply | None:
        """The live entry for ``key`` (now most recently used), counting a hit or a miss."""
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at <= self._clock():
            await self._drop([key])
            entry = None
        if entry is None and self._shared:
            entry = await self._from_store(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        self.tokens_saved += entry.tokens
        return entry

    async def put(self, key: str, kind: Kind, body: bytes, *, content_type: str, tokens: int, route: str) -> None:
        """Store a complete, successful answer (replacing any entry under ``key``)."""
        reply = CachedReply(
            kind=kind,
            body=body,
            content_type=content_type,
            tokens=max(0, tokens),
            route=route,
            expires_at=self._clock() + self.config.ttl_s,
        )
        if len(body) > self.config.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._forget(old)
        self._insert(key, reply)
        if kind == "json" or self._shared:
            await self._store.put_cached(key, reply.doc(), reply.expires_at)
        elif old is not None and old.kind == "json":
            await self._store.delete_cached([key])
        await self._make_room()

    async def clear(self) -> int:
        """Drop every entry (memory and store); returns how many there were."""
        n = len(self._entries)
        self._entries.clear()
        self._bytes = 0
        self._counts = {"json": 0, "stream": 0}
        await self._store.clear_cached()
        return n

    def stats(self) -> dict[str, Any]:
        return {
            "entries": dict(self._counts),
            "hits": self.hits,
            "misses": self.misses,
            "tokens_saved": self.tokens_saved,
            "bytes": self._bytes,
        }

    # -- internals --------------------------------------------------------------------------------------
    async def _from_store(self, key: str) -> CachedReply | None:
        """An entry another replica stored, now in this replica's LRU too."""
        found = await self._store.get_cached(key, self._clock())
        if found is None:
            return None
        reply = CachedReply.from_doc(found[1], found[0])
        if reply is None:
            return None
        self._insert(key, reply)
        await self._make_room()
        return reply if key in self._entries else None

    def _insert(self, key: str, reply: CachedReply) -> None:
        self._entries[key] = reply
        self._bytes += len(reply.body)
        self._counts[reply.kind] += 1

    def _forget(self, reply: CachedReply) -> None:
        self._bytes -= len(reply.body)
        self._counts[reply.kind] -= 1

    async def _drop(self, keys: list[str], *, from_store: bool = True) -> None:
        """Forget ``keys`` here and (``from_store``) in the store too."""
        persisted: list[str] = []
        for key in keys:
            reply = self._entries.pop(key, None)
            if reply is not None:
                self._forget(reply)
                if reply.kind == "json" or self._shared:
                    persisted.append(key)
        if persisted and from_store:
            await self._store.delete_cached(persisted)

    async def _make_room(self) -> None:
        cfg = self.config
        entries = self._entries
        now = self._clock()
        victims: list[str] = []
        # Expired entries at the cold end go first; then the least recently used while over budget.
        over = len(entries) - cfg.max_entries
        size = self._bytes
        for key, reply in entries.items():
            if over <= 0 and size <= cfg.max_bytes and reply.expires_at > now:
                break
            victims.append(key)
            over -= 1
            size -= len(reply.body)
        if victims:
            # On a shared store this replica's memory is only a near cache: what it evicts to stay in its
            # own budget stays in the store (which keeps the fleet's budget itself) for the others.
            await self._drop(victims, from_store=not self._shared)
