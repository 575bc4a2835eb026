"""``RedisLink``: how :class:`~freellm.store.redis_store.RedisHotStore` talks to Redis on the hot path.

A request makes two round trips (the routing decision, then the success's booking with the session
write), so the client-side cost of a command is most of what the fleet's shared state costs a
request. Through ``redis.asyncio.Redis`` each command passes the retry wrapper, the pool's lock and
its observability hooks, a ``Pipeline`` object, the response callbacks and redis-py's pure-Python
packer, and under redis-py's ``socket_timeout`` every write is an ``asyncio.wait_for`` (a task) and
every read its own timeout — about as much CPU as the rest of the request. The link keeps what
matters of redis-py (its connections: connect, RESP parsing by hiredis, disconnect on any error or
cancellation) and drops the layers above:

* commands are packed by ``hiredis.pack_command`` (C) and a call's commands go out in one write;
* the connections a call used are kept for the next call (a free list on top of redis-py's pool: the
  pool still creates, counts and finally closes them), checked as the pool checks them (a connection
  with unread bytes or at EOF is reconnected first);
* no per-read timeout: the store bounds every call by ``storage.redis_timeout_ms`` with one
  ``asyncio.timeout``, and a call cut short leaves its connection disconnected (redis-py does that on
  cancellation), never with a stale reply in it;
* scripts go by EVALSHA; a NOSCRIPT reply (Redis restarted or flushed) is answered by SCRIPT LOAD and
  the command again, in one more round trip.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import NoScriptError, ResponseError

__all__ = ["Arg", "Command", "RedisLink", "Script"]

Arg: TypeAlias = str | bytes | int
Command: TypeAlias = tuple[Arg, ...]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script known by its SHA1 (computed here, as Redis does: nothing is asked of Redis)."""

    source: str
    sha: str

    @classmethod
    def of(cls, source: str) -> Script:
        return cls(source, hashlib.sha1(source.encode()).hexdigest())

    def __call__(self, keys: Sequence[str], args: Sequence[Arg] = ()) -> Command:
        """The EVALSHA command running this script on ``keys`` and ``args``."""
        return ("EVALSHA", self.sha, len(keys), *keys, *args)


class RedisLink:
    """Commands over ``client``'s connections, without the client's per-command layers (see the module).

    ``scripts`` are the ones a NOSCRIPT reply may name (their sources are sent only then)."""

    def __init__(self, client: aioredis.Redis, scripts: Sequence[Script]) -> None:
        self._pool = client.connection_pool
        self._idle: list[AbstractConnection] = []
        self._sources = {s.sha: s.source for s in scripts}

    async def call(self, *commands: Command) -> list[Any]:
        """Every command's reply, in order, after one write (and one more on a NOSCRIPT). An error
        reply raises its ``ResponseError`` once every reply is read (the connection stays usable);
        a network error or a cancellation leaves the connection disconnected (redis-py's rule)."""
        conn = self._idle.pop() if self._idle else await self._pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            if conn.is_connected and await conn.can_read():  # unread bytes or EOF: not safe to reuse
                await conn.disconnect(nowait=True)
            replies = await _exchange(conn, commands)
            for i, reply in enumerate(replies):
                if isinstance(reply, NoScriptError):  # the script is gone from Redis: load it, run again
                    sha = commands[i][1]
                    source = self._sources[sha.decode() if isinstance(sha, bytes) else str(sha)]
                    replies[i] = (await _exchange(conn, (("SCRIPT", "LOAD", source), commands[i])))[1]
        except BaseException:
            # Whatever state a failure or a cancellation left it in (even a connect cut short before its
            # AUTH/SELECT, which redis-py does not undo): closed, so its next send starts a fresh one.
            await conn.disconnect(nowait=True)
            raise
        finally:
            self._idle.append(conn)
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    async def close(self) -> None:
        """Give the connections back to the pool (whose ``aclose`` then closes them)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._pool.release(conn)


async def _exchange(conn: AbstractConnection, commands: Sequence[Command]) -> list[Any]:
    """Send ``commands`` in one write, read one reply each (an error reply is returned, not raised)."""
    packed = b"".join([hiredis.pack_command(c) for c in commands])  # type: ignore[arg-type]  # its stub: 1-tuples
    await conn.send_packed_command(packed, check_health=False)
    replies: list[Any] = []
    for _ in commands:
        try:
            replies.append(await conn.read_response())
        except ResponseError as exc:
            replies.append(exc)
    return replies
