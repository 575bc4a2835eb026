"""The Lua scripts of :class:`~freellm.store.redis_store.RedisHotStore` (docs/deployment.md).

Each runs atomically inside Redis, so a read-decide-write of one replica (never-shorten a cooldown,
check-and-lease, trim the session budget) cannot interleave with another's, and costs one round trip.

Conventions shared by the scripts:

* Numbers that must survive exactly (epoch seconds with fractions) arrive as ``repr(float)`` strings and
  are stored as given; a number computed in Lua is written with ``fmt`` (``%.17g``), never with Lua's
  default 14-digit conversion. Replies carry integers only (Redis truncates Lua numbers in replies).
* Rate windows: one hash per scope holds both windows (``m``: 1 s buckets over 60 s, ``d``: 60 s
  buckets over 24 h): per bucket ``<w>r<index>`` / ``<w>t<index>`` (requests, tokens), the running sums
  ``<w>R`` / ``<w>T`` and the oldest/newest bucket indexes ``<w>lo`` / ``<w>hi`` — the layout of
  MemoryStore's ``Window`` (freellm.store.windows) (same pruning rule, same fold of a late ``now`` into the newest bucket), so
  ``usage`` is O(1) amortised.
* Leases: one hash per scope, lease id → ``"<expiry> <tokens>"``, and one namespace-wide sorted set of
  lease ids by expiry (for ``lease_count``); ``lnow`` is the newest ``now`` a lease operation saw.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACQUIRE",
    "ACQUIRE_ROUTE",
    "ACQUIRE_WITHIN",
    "ACTIVE_COOLDOWNS",
    "CLEAR_CACHED",
    "EVENTS",
    "LEASE_COUNT",
    "LOAD_CACHED",
    "PUT_BUDGETED",
    "RECORD_USAGE",
    "RELEASE",
    "SETTLE",
    "SET_COOLDOWN",
    "USAGE",
]

_COMMON: Final = """
local function fmt(x) return string.format('%.17g', x) end

-- Drop the buckets of window w that have aged out at `now` (a bucket i leaves once
-- (i + 1) * width <= now - span); returns requests, tokens and the oldest bucket index (-1: empty).
local function prune(k, w, width, span, now)
  local f = redis.call('HMGET', k, w .. 'lo', w .. 'hi', w .. 'R', w .. 'T')
  if not f[1] then return 0, 0, -1 end
  local lo = tonumber(f[1])
  local hi = tonumber(f[2])
  local cutoff = now - span
  -- The common case: the oldest bucket (every kept bucket is >= lo) has not aged out.
  if (lo + 1) * width > cutoff then return tonumber(f[3]), tonumber(f[4]), lo end
  local gone_r, gone_t = 0, 0
  while lo <= hi do
    local r = redis.call('HGET', k, w .. 'r' .. lo)
    if r then
      if (lo + 1) * width > cutoff then break end
      gone_r = gone_r + tonumber(r)
      gone_t = gone_t + tonumber(redis.call('HGET', k, w .. 't' .. lo))
      redis.call('HDEL', k, w .. 'r' .. lo, w .. 't' .. lo)
    end
    lo = lo + 1
  end
  if lo > hi then
    redis.call('HDEL', k, w .. 'lo', w .. 'hi', w .. 'R', w .. 'T')
    return 0, 0, -1
  end
  if gone_r == 0 and gone_t == 0 then
    return tonumber(redis.call('HGET', k, w .. 'R')), tonumber(redis.call('HGET', k, w .. 'T')), lo
  end
  redis.call('HSET', k, w .. 'lo', lo)
  -- (0 - x, not -x: Lua's -0 would reach Redis as "-0", which HINCRBY refuses)
  local R = redis.call('HINCRBY', k, w .. 'R', 0 - gone_r)
  local T = redis.call('HINCRBY', k, w .. 'T', 0 - gone_t)
  return R, T, lo
end

-- Live leases of one scope (expired ones are dropped here and from the namespace-wide set).
local function leased(k, z, now)
  local all = redis.call('HGETALL', k)
  local n, tok = 0, 0
  for i = 1, #all, 2 do
    local v = all[i + 1]
    local sp = string.find(v, ' ', 1, true)
    if tonumber(string.sub(v, 1, sp - 1)) <= now then
      redis.call('HDEL', k, all[i])
      redis.call('ZREM', z, all[i])
    else
      n = n + 1
      tok = tok + tonumber(string.sub(v, sp + 1))
    end
  end
  return n, tok
end

-- Take a lease: KEYS-like args (scope hash, namespace set, newest-now key), then its fields.
local function take(k, z, znow, id, exp, tokens, ttl_ms, now, now_s)
  redis.call('HSET', k, id, exp .. ' ' .. tokens)
  redis.call('ZADD', z, exp, id)
  if redis.call('PTTL', k) < tonumber(ttl_ms) then redis.call('PEXPIRE', k, ttl_ms) end
  local last = tonumber(redis.call('GET', znow) or '0')
  if now > last then redis.call('SET', znow, now_s) end
  redis.call('ZREMRANGEBYSCORE', z, '-inf', now_s)
end

local function usage(ku, kl, z, now)
  local mr, mt, mlo = prune(ku, 'm', 1, 60, now)
  local dr, dt, dlo = prune(ku, 'd', 60, 86400, now)
  local n, tok = leased(kl, z, now)
  return {mr, mt, mlo, dr, dt, dlo, n, tok}
end
"""

USAGE: Final = (
    _COMMON
    + """
-- KEYS: usage hash, lease hash, lease set. ARGV: now.
return usage(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))
"""
)

_RECORD_FN: Final = """
-- Count one request of `tokens` in both windows of usage hash k (second index mi, minute index di).
local function record(k, now, mi, di, tokens, ttl_ms)
  local function add(w, idx)
    local hi = redis.call('HGET', k, w .. 'hi')
    if hi and tonumber(hi) >= idx then
      idx = tonumber(hi)  -- a late `now`: folded into the newest bucket (it ages out a little later)
    else
      redis.call('HSET', k, w .. 'hi', idx)
      if not redis.call('HGET', k, w .. 'lo') then redis.call('HSET', k, w .. 'lo', idx) end
    end
    redis.call('HINCRBY', k, w .. 'r' .. idx, 1)
    redis.call('HINCRBY', k, w .. 't' .. idx, tokens)
    redis.call('HINCRBY', k, w .. 'R', 1)
    redis.call('HINCRBY', k, w .. 'T', tokens)
  end
  prune(k, 'm', 1, 60, now)
  prune(k, 'd', 60, 86400, now)
  add('m', mi)
  add('d', di)
  redis.call('PEXPIRE', k, ttl_ms)
end
"""

RECORD_USAGE: Final = (
    _COMMON
    + _RECORD_FN
    + """
-- KEYS: usage hash. ARGV: now, second index, minute index, tokens, ttl_ms.
record(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5])
return 1
"""
)

SETTLE: Final = (
    _COMMON
    + _RECORD_FN
    + """
-- A success's booking in one script: count it, clear the failure streaks it ends, release its lease.
-- KEYS: usage hash, lease hash, lease set, then the event keys to delete (none or more).
-- ARGV: now, second index, minute index, tokens, ttl_ms, lease id.
record(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5])
if #KEYS > 3 then redis.call('DEL', unpack(KEYS, 4)) end
if redis.call('HDEL', KEYS[2], ARGV[6]) == 1 then redis.call('ZREM', KEYS[3], ARGV[6]) end
return 1
"""
)

ACQUIRE: Final = (
    _COMMON
    + """
-- KEYS: lease hash, lease set, newest-now key. ARGV: now, lease id, expiry, tokens, ttl_ms.
take(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[1]), ARGV[1])
return 1
"""
)

_ACQUIRE_WITHIN_FN: Final = """
-- KEYS: usage hash, lease hash, lease set, newest-now key.
-- ARGV: now, lease id, expiry, tokens, ttl_ms, rpm, rpd, tpm, tpd ('' = no limit).
-- The arithmetic of freellm.store.base.within_limits (keep them in step). Returns {granted, usage...}.
local function acquire_within()
  local now = tonumber(ARGV[1])
  local u = usage(KEYS[1], KEYS[2], KEYS[3], now)
  local function lim(s) if s == '' then return nil end return tonumber(s) end
  local rpm, rpd, tpm, tpd = lim(ARGV[6]), lim(ARGV[7]), lim(ARGV[8]), lim(ARGV[9])
  local leased_n = u[7]
  local leased_t = u[8] + tonumber(ARGV[4])
  local ok = true
  if rpd and u[4] + leased_n >= rpd then ok = false end
  if ok and rpm and u[1] + leased_n >= rpm then ok = false end
  if ok and tpd and u[5] + leased_t > tpd then ok = false end
  if ok and tpm and u[2] + leased_t > tpm then ok = false end
  local granted = 0
  if ok then
    take(KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3], ARGV[4], ARGV[5], now, ARGV[1])
    granted = 1
  end
  table.insert(u, 1, granted)
  return u
end
"""

ACQUIRE_WITHIN: Final = _COMMON + _ACQUIRE_WITHIN_FN + "return acquire_within()\n"

ACQUIRE_ROUTE: Final = (
    _COMMON
    + _ACQUIRE_WITHIN_FN
    + """
-- The router's per-key decision in one round trip. KEYS: as ACQUIRE_WITHIN, then the cooldown hash.
-- ARGV: as ACQUIRE_WITHIN, then the scopes whose cooldown forbids the lease (the model's, the key's).
-- Returns {0, i, "<until> <json>"} when ARGV[9 + i] is cooling down, else {granted, 0, '', usage...}.
local now = tonumber(ARGV[1])
for i = 10, #ARGV do
  local cur = redis.call('HGET', KEYS[5], ARGV[i])
  if cur and tonumber(string.match(cur, '^(%S+)')) > now then return {0, i - 9, cur} end
end
local u = acquire_within()
table.insert(u, 2, 0)
table.insert(u, 3, '')
return u
"""
)

RELEASE: Final = """
-- KEYS: lease hash, lease set. ARGV: lease id. Another scope's lease id is left alone.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1
"""

LEASE_COUNT: Final = """
-- KEYS: lease set, newest-now key. ARGV: this process's newest now.
local now = ARGV[1]
local last = redis.call('GET', KEYS[2])
if last and tonumber(last) > tonumber(now) then now = last end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""

SET_COOLDOWN: Final = """
-- KEYS: cooldown hash. ARGV: scope, until, value ("<until> <json>").
-- Never shortens a longer one (an expired longer one would have let this one expire too).
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local u = tonumber(string.match(cur, '^(%S+)'))
  if u and u > tonumber(ARGV[2]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

ACTIVE_COOLDOWNS: Final = """
-- KEYS: cooldown hash. ARGV: now. Drops the expired, returns the rest as scope, value pairs.
local now = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  if tonumber(string.match(all[i + 1], '^(%S+)')) <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
"""

EVENTS: Final = """
-- KEYS: event set (score = ts), horizon key. ARGV: now, window, member ('' = count only), cap.
-- MemoryStore's EventLog (freellm.store.windows): events older than the longest window ever asked are dropped.
local function fmt(x) return string.format('%.17g', x) end
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local adding = ARGV[3] ~= ''
if not adding and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local h = tonumber(redis.call('GET', KEYS[2]) or '0')
if window > h then
  h = window
  redis.call('SET', KEYS[2], ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(now - h))
if adding then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[4]) + 1))
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local ttl = fmt(math.ceil((h + 60) * 1000))
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return redis.call('ZCOUNT', KEYS[1], '(' .. fmt(now - window), '+inf')
"""

PUT_BUDGETED: Final = """
-- Sessions and cache entries: one string per entry under ARGV[5] .. name, an order set (score = a
-- sequence number: least recently stored first) and its counter.
-- KEYS: entry key, order set, sequence key. ARGV: name, value, px, budget (0 = none), entry prefix.
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
local seq = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
local budget = tonumber(ARGV[4])
if budget > 0 then
  local over = redis.call('ZCARD', KEYS[2]) - budget
  if over > 0 then
    local old = redis.call('ZPOPMIN', KEYS[2], over)
    for i = 1, #old, 2 do redis.call('DEL', ARGV[5] .. old[i]) end
  end
end
return 1
"""

LOAD_CACHED: Final = """
-- KEYS: order set. ARGV: now, limit, entry prefix. The newest `limit` live entries, newest first,
-- as name, value pairs; names whose entry Redis already expired leave the order set.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
local got = 0
if limit <= 0 then return out end
for _, name in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, -1)) do
  local v = redis.call('GET', ARGV[3] .. name)
  if not v then
    redis.call('ZREM', KEYS[1], name)
  elseif tonumber(string.match(v, '^(%S+)')) > now then
    out[#out + 1] = name
    out[#out + 1] = v
    got = got + 1
    if got >= limit then break end
  end
end
return out
"""

CLEAR_CACHED: Final = """
-- KEYS: order set, sequence key. ARGV: entry prefix.
local names = redis.call('ZRANGE', KEYS[1], 0, -1)
for i = 1, #names, 500 do
  local batch = {}
  for j = i, math.min(i + 499, #names) do batch[#batch + 1] = ARGV[1] .. names[j] end
  redis.call('DEL', unpack(batch))
end
redis.call('DEL', KEYS[1])
return #names
"""
