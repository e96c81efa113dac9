"""The Lua scripts: each lease operation is one atomic step on one job's keys.

They do what :class:`anarchon.memory.MemoryStore` does under its lock, on the
server's clock (``TIME``). A run record is JSON (``cjson``) with times in
epoch milliseconds; ``live`` holds exactly the running runs, scored by lease
expiry, so finding dead or live leases never scans history.

On a single server the scripts also keep the per-prefix hint (job name ->
earliest lease expiry) up to date, passed as the last key: exact, or earlier
than the truth (then a take-over pass looks and sets it right), never later. On Redis Cluster that
key lives in another slot, so it is left out and the client keeps the hint
with ``TOUCH`` and ``SETTLE``; see :mod:`anarchon_redis.backend`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = [
    "CLAIM",
    "DUE",
    "FINISH",
    "HAND_OVER",
    "HISTORY",
    "PEEK",
    "RENEW",
    "SETTLE",
    "TAKE_OVER",
    "TOUCH",
    "Script",
]

# Helpers, each script taking only those it calls: a closure costs the script a microsecond or so on every call.
# Numbers are formatted with %d: Lua's own tostring keeps only 14 digits.
_HELPERS: dict[str, str] = {
    "now_ms": r"""
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
""",
    "num": r"""
local function num(x) return string.format('%d', x) end
""",
    "sync_hint": r"""
local function sync_hint(live, hint, job)
  if not hint then return end
  local first = redis.call('ZRANGE', live, 0, 0, 'WITHSCORES')
  if first[1] then redis.call('ZADD', hint, first[2], job) else redis.call('ZREM', hint, job) end
end
""",
    "next_expiry": r"""
local function next_expiry(live)
  local first = redis.call('ZRANGE', live, 0, 0, 'WITHSCORES')
  return first[2] or false
end
""",
    "drop_if_done": r"""
local function drop_if_done(runs, order, live, rid)
  if not redis.call('ZSCORE', live, rid) then
    redis.call('HDEL', runs, rid)
    redis.call('ZREM', order, rid)
  end
end
""",
    "trim": r"""
local function trim(runs, order, live, size, ttl, now)
  for _, rid in ipairs(redis.call('ZREVRANGE', order, size, -1)) do drop_if_done(runs, order, live, rid) end
  if ttl > 0 then
    for _, rid in ipairs(redis.call('ZRANGEBYSCORE', order, '-inf', '(' .. num(2 * (now - ttl)))) do
      drop_if_done(runs, order, live, rid)
    end
  end
end
""",
    "has": r"""
-- Whether a stored record has this field with this JSON value, read without decoding it. Exact: cjson
-- escapes every quote inside a string, so '"name":' occurs only as a key, and the value is followed by ','
-- or '}'.
local function has(raw, name, value)
  local at = '"' .. name .. '":' .. value
  return string.find(raw, at .. ',', 1, true) ~= nil or string.find(raw, at .. '}', 1, true) ~= nil
end
""",
    "owned": r"""
local function owned(runs, rid, token)
  local raw = redis.call('HGET', runs, rid)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if rec.token ~= token or rec.status ~= 'running' then return nil end
  return rec
end
""",
}

# KEYS: state, runs, order, live[, hint]
# ARGV: slot, manual, catch_up, missed, started, skip, lease_ms, history_size, history_ttl_ms (flags 0/1,
#       ttl 0 = none) packed as nine little-endian doubles (exact up to 2^53), token, instance, job
# The numbers travel as one binary string, which struct unpacks in a fraction of what splitting text
# costs in Lua, and the record is built here: no JSON to encode on the client. A new grant is answered
# with its fencing alone (the client knows the rest), the slot of the dead run it superseded and the
# mark it found (each false when there is none); a claim found already decided, with its record.
_CLAIM = r"""
local state, runs, order, live, hint = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local slot, manual, catch_up, missed, started, skip, lease, size, ttl = struct.unpack('<ddddddddd', ARGV[1])
manual, catch_up, skip = manual == 1, catch_up == 1, skip == 1
local token, job = ARGV[2], ARGV[4]
local rid = manual and (num(slot) .. 'm') or num(slot)
local existing = redis.call('HGET', runs, rid)
if existing then
  -- Most often another instance's record: told by its token without decoding it (see has()).
  if not has(existing, 'token', cjson.encode(token)) then return {'lost'} end
  local rec = cjson.decode(existing)
  if rec.status == 'skipped' then return {'skipped', existing} end
  if rec.status == 'running' then return {'won', existing} end
  return {'lost'}
end
local now = now_ms()
local st = redis.call('HMGET', state, 'mark', 'fencing', 'won')
local mark, fencing, won = tonumber(st[1]), tonumber(st[2]) or 0, tonumber(st[3])
-- A late claim was delayed past a newer slot's: too late to run. Overlapped by an older run all
-- along, it is recorded skipped (the mark stays); otherwise it leaves no record.
local late = not manual and mark and slot <= mark
if late and not skip then return {'lost'} end
local busy, supersedes = false, nil
local leases = redis.call('ZRANGE', live, 0, -1, 'WITHSCORES')
for i = 1, #leases, 2 do
  if late then
    local raw = tonumber(leases[i + 1]) > now and redis.call('HGET', runs, leases[i])
    if raw and cjson.decode(raw).slot < slot then busy = true end
  elseif tonumber(leases[i + 1]) > now then
    busy = true
  elseif not manual then
    local dead = leases[i]
    local raw = redis.call('HGET', runs, dead)
    if not raw then
      redis.call('ZREM', live, dead)
    else
      local r = cjson.decode(raw)
      if not r.manual and r.slot < slot then
        r.status = 'abandoned'
        redis.call('HSET', runs, dead, cjson.encode(r))
        redis.call('ZREM', live, dead)
        if r.slot == won then supersedes = r.slot end
      end
    end
  end
end
if late and not busy then return {'lost'} end
local rec = {
  job = job, slot = slot, instance = ARGV[3], manual = manual, catch_up = catch_up, missed = missed,
  started = started, finished = cjson.null, duration = cjson.null, error = cjson.null,
  token = token, lease = lease, attempt = 1, handed = false
}
redis.call('ZADD', order, num(slot * 2 + (manual and 1 or 0)), rid)
local outcome = 'won'
if skip and busy then
  outcome = 'skipped'
  rec.status, rec.fencing, rec.finished, rec.duration = 'skipped', cjson.null, rec.started, 0
  if not manual and not late then redis.call('HSET', state, 'mark', num(slot)) end
else
  rec.status, rec.fencing = 'running', fencing + 1
  redis.call('ZADD', live, num(now + lease), rid)
  if hint then redis.call('ZADD', hint, 'LT', num(now + lease), job) end
  if manual then
    redis.call('HSET', state, 'fencing', num(rec.fencing))
  else
    redis.call('HSET', state, 'mark', num(slot), 'won', num(slot), 'fencing', num(rec.fencing))
  end
end
local raw = cjson.encode(rec)
redis.call('HSET', runs, rid, raw)
trim(runs, order, live, size, ttl, now)
if outcome == 'won' then return {outcome, rec.fencing, supersedes or false, (not manual and mark) or false} end
return {outcome, raw}
"""

# KEYS: runs, live[, hint]    ARGV: rid, token, job
_RENEW = r"""
local runs, live, hint = KEYS[1], KEYS[2], KEYS[3]
local rec = owned(runs, ARGV[1], ARGV[2])
if not rec or rec.handed then return 0 end
redis.call('ZADD', live, num(now_ms() + rec.lease), ARGV[1])
sync_hint(live, hint, ARGV[3])
return 1
"""

# KEYS: runs, live[, hint]    ARGV: rid, token, final record, job
# The final record comes as JSON with ``fin`` but without the closing brace: the script adds
# ``token`` (encoded here, as every stored token is), ``lease`` and ``handed`` from the stored
# record. A retry of a finish that already went through answers 1 again (``fin``). Nothing is
# decoded: half of what a finish cost was JSON work.
_FINISH = r"""
local runs, live, hint = KEYS[1], KEYS[2], KEYS[3]
local rid, token = ARGV[1], cjson.encode(ARGV[2])
local raw = redis.call('HGET', runs, rid)
if not raw or not has(raw, 'token', token) then return 0 end
if not has(raw, 'status', '"running"') then
  if has(raw, 'fin', 'true') then return 1 end
  return 0
end
local lease = string.match(raw, '"lease":([^,}]+)')
local handed = has(raw, 'handed', 'true') and 'true' or 'false'
redis.call('HSET', runs, rid, ARGV[3] .. ',"token":' .. token .. ',"lease":' .. lease .. ',"handed":' .. handed .. '}')
redis.call('ZREM', live, rid)
sync_hint(live, hint, ARGV[4])
return 1
"""

# KEYS: runs, live[, hint]    ARGV: rid, token, job
_HAND_OVER = r"""
local runs, live, hint = KEYS[1], KEYS[2], KEYS[3]
local rid = ARGV[1]
local rec = owned(runs, rid, ARGV[2])
if not rec then return 0 end
rec.handed = true
redis.call('HSET', runs, rid, cjson.encode(rec))
redis.call('ZADD', live, num(now_ms()), rid)
sync_hint(live, hint, ARGV[3])
return 1
"""

# KEYS: state, runs, live[, hint]    ARGV: instance, max_attempts, lease_ms, nonce, job
# Returns {next lease expiry or nil, granted records...}. Runs already granted
# under this nonce are returned again, so a retried call loses nothing.
_TAKE_OVER = r"""
local state, runs, live, hint = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local instance, max_attempts, lease, nonce = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local out = {false}
local mine = nonce .. ':'
for _, rid in ipairs(redis.call('ZRANGEBYSCORE', live, '(' .. num(now), '+inf')) do
  local raw = redis.call('HGET', runs, rid)
  if raw then
    local r = cjson.decode(raw)
    if string.sub(r.token, 1, #mine) == mine then out[#out + 1] = raw end
  end
end
-- The newest run is the newest slot won: a slot skipped for a dead run moved the mark but ran nothing.
local won = tonumber(redis.call('HGET', state, 'won'))
for _, rid in ipairs(redis.call('ZRANGEBYSCORE', live, '-inf', num(now))) do
  local raw = redis.call('HGET', runs, rid)
  if not raw then
    redis.call('ZREM', live, rid)
  else
    local r = cjson.decode(raw)
    local newest = r.manual or r.slot == won
    if not newest or (r.attempt >= max_attempts and not r.handed) then
      r.status = 'abandoned'
      redis.call('ZREM', live, rid)
      redis.call('HSET', runs, rid, cjson.encode(r))
    else
      local f = redis.call('HINCRBY', state, 'fencing', 1)
      -- a hand-over is no death: the run goes on as the same attempt
      if not r.handed then r.attempt = r.attempt + 1 end
      r.token, r.handed, r.lease, r.instance = mine .. f, false, lease, instance
      r.fencing, r.started = f, now
      raw = cjson.encode(r)
      redis.call('HSET', runs, rid, raw)
      redis.call('ZADD', live, num(now + lease), rid)
      out[#out + 1] = raw
    end
  end
end
sync_hint(live, hint, ARGV[5])
out[1] = next_expiry(live)
return out
"""

# KEYS: runs, order    ARGV: limit
_HISTORY = r"""
local out = {}
for _, rid in ipairs(redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)) do
  local raw = redis.call('HGET', KEYS[1], rid)
  if raw then out[#out + 1] = raw end
end
return out
"""

# KEYS: live    How many runs of the job hold a lease: a sweep looks closer only at those.
_PEEK = r"""
return redis.call('ZCARD', KEYS[1])
"""

# KEYS: hint    Returns {job, expiry, job, expiry, ...} of the jobs whose earliest lease expired.
_DUE = r"""
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', num(now_ms()), 'WITHSCORES')
"""

# Cluster only. KEYS: hint    ARGV: job, lease_ms
# Before a claim: make sure the job is looked at when a lease granted now
# would expire. A due entry is moved too, or a take-over pass that read it
# just before could settle it away under this claim.
_TOUCH = r"""
local now = now_ms()
local at = now + tonumber(ARGV[2])
local cur = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not cur or cur <= now or at < cur then redis.call('ZADD', KEYS[1], num(at), ARGV[1]) end
return 1
"""

# Cluster only. KEYS: hint    ARGV: job, seen expiry ('' = sweep), next expiry ('' = none)
# After a take-over pass: record the job's true next expiry, unless a claim
# touched the entry since the pass read it (then that claim's entry stays).
_SETTLE = r"""
local job, seen, nxt = ARGV[1], ARGV[2], ARGV[3]
local cur = tonumber(redis.call('ZSCORE', KEYS[1], job))
if seen == '' then
  if nxt ~= '' and (not cur or tonumber(nxt) < cur) then redis.call('ZADD', KEYS[1], nxt, job) end
  return 1
end
if cur and cur == tonumber(seen) then
  if nxt == '' then redis.call('ZREM', KEYS[1], job) else redis.call('ZADD', KEYS[1], nxt, job) end
end
return 1
"""


@dataclass(frozen=True)
class Script:
    """A script's source and SHA1, computed locally: no load round trip needed.

    Callers send ``EVALSHA`` and fall back to ``EVAL`` (which also caches the
    script) on ``NOSCRIPT``: after a restart, failover, or on a new cluster node.
    """

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest())


def _script(name: str, body: str, *helpers: str) -> Script:
    return Script(name, "".join(_HELPERS[h] for h in helpers) + body)


CLAIM = _script("claim", _CLAIM, "now_ms", "num", "drop_if_done", "trim", "has")
RENEW = _script("renew", _RENEW, "now_ms", "num", "sync_hint", "owned")
FINISH = _script("finish", _FINISH, "has", "sync_hint")
HAND_OVER = _script("hand_over", _HAND_OVER, "now_ms", "num", "sync_hint", "owned")
TAKE_OVER = _script("take_over", _TAKE_OVER, "now_ms", "num", "sync_hint", "next_expiry")
HISTORY = _script("history", _HISTORY)
DUE = _script("due", _DUE, "now_ms", "num")
PEEK = _script("peek", _PEEK)
TOUCH = _script("touch", _TOUCH, "now_ms", "num")
SETTLE = _script("settle", _SETTLE)
