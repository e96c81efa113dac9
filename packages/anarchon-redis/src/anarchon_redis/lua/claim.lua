-- KEYS: state, runs, order, live[, hint]
-- ARGV: slot, manual, catch_up, missed, started, skip, lease_ms, history_size, history_ttl_ms, known (flags
--       0/1, ttl 0 = none) packed as ten little-endian doubles (exact up to 2^53), token, instance, job,
--       then the dead owners' pairs (helpers/dead.lua), if any. ``known``: the newest scheduled slot this
--       client was answered about (0: none), so the job's mark is at least that (_known.py).
-- The numbers travel as one binary string, which struct unpacks in a fraction of what splitting text
-- costs in Lua, and the record is built here: no JSON to encode on the client. A new grant is answered
-- with its fencing alone (the client knows the rest), the slot of the dead run it superseded and the
-- mark it found (each false when there is none); a claim found already decided, with its record.
local state, runs, order, live, hint = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local slot, manual, catch_up, missed, started, skip, lease, size, ttl, known = struct.unpack('<dddddddddd', ARGV[1])
manual, catch_up, skip = manual == 1, catch_up == 1, skip == 1
local token, job = ARGV[2], ARGV[4]
local rid = manual and (num(slot) .. 'm') or num(slot)
local existing = redis.call('HGET', runs, rid)
if existing then
  -- Most often another instance's record: told by its token without decoding it (see has()).
  if not has(existing, 'token', cjson.encode(token)) then return {'lost'} end
  local rec = decode(existing)
  if not rec then return {'lost'} end
  if rec.status == 'skipped' then return {'skipped', existing} end
  if rec.status == 'running' then return {'won', existing} end
  return {'lost'}
end
local mark, fencing, won, bad = read_state(state)
if bad then return redis.error_reply(bad) end
if not manual and known > 0 and (not mark or mark < known) then
  -- Redis went back in time (restarted empty or from an old snapshot, keys deleted): this slot may have
  -- been won before and its record is gone. It is not run; the mark set here loses every other claim of
  -- it, and the counter goes on from the clock, above the tokens the lost state gave. The next slot runs.
  redis.call('HSET', state, 'mark', num(math.max(slot, known)), 'fencing', num(math.max(fencing, now_ms())))
  return {'forgotten'}
end
local now = now_ms()
local dead = read_dead(ARGV, 5)
-- A late claim was delayed past a newer slot's: too late to run. Overlapped by an older run all
-- along, it is recorded skipped (the mark stays); otherwise it leaves no record.
local late = not manual and mark and slot <= mark
if late and not skip then return {'lost'} end
local busy, supersedes = false, nil
local leases = redis.call('ZRANGE', live, 0, -1, 'WITHSCORES')
for i = 1, #leases, 2 do
  local expiry = tonumber(leases[i + 1])
  -- A lease whose record is gone or unreadable holds nothing: it is dropped, or it would keep the job busy.
  local r = decode(redis.call('HGET', runs, leases[i]))
  -- A live lease of a dead owner holds nothing either: not busy, and abandoned as an expired one is.
  local held = r and expiry > now and not owner_dead(dead, r, expiry)
  if not r then
    redis.call('ZREM', live, leases[i])
  elseif late then
    if held and r.slot < slot then busy = true end
  elseif held then
    busy = true
  elseif not manual and not r.manual and r.slot < slot then
    r.status = 'abandoned'
    redis.call('HSET', runs, leases[i], cjson.encode(r))
    redis.call('ZREM', live, leases[i])
    if r.slot == won then supersedes = r.slot end
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
  if hint then redis.pcall('ZADD', hint, 'LT', num(now + lease), job) end
  if manual then
    redis.call('HSET', state, 'fencing', num(rec.fencing))
  else
    redis.call('HSET', state, 'mark', num(slot), 'won', num(slot), 'fencing', num(rec.fencing))
  end
end
local raw = cjson.encode(rec)
redis.call('HSET', runs, rid, raw)
if not manual then
  -- Ranked claims (the core's _rank.py): the fleet hears the slot is decided, so a later-ranked
  -- instance sends no claim for it. The channel is the prefix's, which precedes the job's hash tag.
  tell(string.sub(state, 1, string.find(state, '{', 1, true) - 1) .. 'decided', job .. ' ' .. num(slot))
end
trim(runs, order, live, size, ttl, now)
if outcome == 'won' then return {outcome, rec.fencing, supersedes or false, (not manual and mark) or false} end
return {outcome, raw}
