"""How :class:`~freellm.store.redis_store.RedisHotStore` spells its values in Redis, and reads them back.

Apart from the store's logic so that each rule is stated once: floats that must survive exactly travel
as ``repr``; entries with an expiry are ``"<expires_at> <json>"``; a script's usage reply is eight
integers (see :mod:`freellm.store.redis_lua`), turned into the :class:`UsageSnapshot` MemoryStore
would give.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Final

import orjson

from freellm.store.base import CooldownRecord, UsageSnapshot
from freellm.store.windows import DAY_BUCKET_S, DAY_S, MINUTE_BUCKET_S, MINUTE_S

if TYPE_CHECKING:
    from freellm.config import ModelLimits
    from freellm.store.redis_link import Arg

__all__ = [
    "GRACE_MS",
    "cooldown",
    "entry",
    "fnum",
    "limit_args",
    "px",
    "snapshot",
    "text",
    "usage_args",
    "with_leases",
]

_USAGE_TTL_MS: Final = int((DAY_S + DAY_BUCKET_S + 60.0) * 1000)
"""A scope's window hash outlives its newest bucket by the day window plus a bucket (then a margin)."""
GRACE_MS: Final = 1000
"""Redis keeps an entry this much past its logical expiry: reads compare with the caller's ``now``
(which may lag the server's clock a little), Redis' TTL is only the garbage collector."""


def fnum(x: float) -> str:
    """A float as Redis and Lua read it back exactly."""
    return repr(float(x))


def px(expires_at: float) -> int:
    """Milliseconds Redis keeps an entry that expires at ``expires_at`` (wall clock, plus the grace)."""
    return max(0, math.ceil((expires_at - time.time()) * 1000)) + GRACE_MS


def text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def entry(raw: bytes) -> tuple[float, Any]:
    """A stored ``"<expires_at> <json>"`` value."""
    head, _, body = raw.partition(b" ")
    return float(head), orjson.loads(body)


def cooldown(raw: bytes) -> CooldownRecord:
    """A cooldown entry (``"<until> [source, reason]"``)."""
    until, data = entry(raw)
    source, reason = data
    return CooldownRecord(until=until, source=str(source), reason=str(reason))


def usage_args(tokens: int, now: float) -> list[Arg]:
    """RECORD_USAGE's (and SETTLE's) first arguments: now, its second and minute bucket, tokens, TTL."""
    return [fnum(now), int(now // MINUTE_BUCKET_S), int(now // DAY_BUCKET_S), int(tokens), _USAGE_TTL_MS]


def limit_args(limits: ModelLimits) -> list[Arg]:
    """rpm, rpd, tpm, tpd as the scripts read them ('' = no limit)."""
    return ["" if v is None else int(v) for v in (limits.rpm, limits.rpd, limits.tpm, limits.tpd)]


def snapshot(row: list[int]) -> UsageSnapshot:
    """The USAGE script's reply: minute R/T/oldest, day R/T/oldest, leased n/tokens (oldest -1: empty)."""
    mr, mt, mlo, dr, dt, dlo, n, tok = (int(v) for v in row)
    return UsageSnapshot(
        requests_minute=mr,
        requests_day=dr,
        tokens_minute=mt,
        tokens_day=dt,
        leased_requests=n,
        leased_tokens=tok,
        minute_frees_at=None if mlo < 0 else (mlo + 1) * MINUTE_BUCKET_S + MINUTE_S,
        day_frees_at=None if dlo < 0 else (dlo + 1) * DAY_BUCKET_S + DAY_S,
    )


def with_leases(snap: UsageSnapshot, requests: int, tokens: int) -> UsageSnapshot:
    """``snap`` with more leases counted (those taken on local state during an outage)."""
    return UsageSnapshot(
        requests_minute=snap.requests_minute,
        requests_day=snap.requests_day,
        tokens_minute=snap.tokens_minute,
        tokens_day=snap.tokens_day,
        leased_requests=snap.leased_requests + requests,
        leased_tokens=snap.leased_tokens + tokens,
        minute_frees_at=snap.minute_frees_at,
        day_frees_at=snap.day_frees_at,
    )
