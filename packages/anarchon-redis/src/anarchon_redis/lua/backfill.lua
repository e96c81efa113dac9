-- KEYS: state, runs, order, live[, hint]
-- ARGV: slot, catch_up, missed, started, lease_ms, history_size, history_ttl_ms (ttl 0 = none) packed as seven
--       little-endian doubles, token, instance, job
-- A backfill claim (anarchon.backend): the slot's scheduled run is granted only when the slot has no record,
-- under the same run id the fleet's claim of the slot uses, so the two (and every overlapping backfill) meet
-- at one field of `runs`. The mark moves up to the slot when it is above it, `won` stays, fencing grows.
-- No overlap check: the caller bounds it.
-- Answers {'won', fencing} for a new grant, {'won', record} for a retry of a running claim with its own
-- token, {'lost', record} for a slot already recorded.
local state, runs, order, live, hint = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local slot, catch_up, missed, started, lease, size, ttl = struct.unpack('<ddddddd', ARGV[1])
local token, job = ARGV[2], ARGV[4]
local rid = num(slot)
local existing = redis.call('HGET', runs, rid)
if existing then
  local rec = decode(existing)
  if rec and rec.token == token and rec.status == 'running' then return {'won', existing} end
  return {'lost', existing}
end
local mark, fencing, _, bad = read_state(state)
if bad then return redis.error_reply(bad) end
local now = now_ms()
local rec = {
  job = job, slot = slot, instance = ARGV[3], manual = false, catch_up = catch_up == 1, missed = missed,
  started = started, finished = cjson.null, duration = cjson.null, error = cjson.null,
  token = token, lease = lease, attempt = 1, handed = false, status = 'running', fencing = fencing + 1
}
redis.call('ZADD', order, num(slot * 2), rid)
redis.call('ZADD', live, num(now + lease), rid)
if hint then redis.pcall('ZADD', hint, 'LT', num(now + lease), job) end
redis.call('HSET', state, 'fencing', num(rec.fencing))
if not mark or mark < slot then redis.call('HSET', state, 'mark', num(slot)) end
redis.call('HSET', runs, rid, cjson.encode(rec))
trim(runs, order, live, size, ttl, now)
return {'won', rec.fencing}
