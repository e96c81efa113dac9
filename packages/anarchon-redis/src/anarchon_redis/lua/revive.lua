-- KEYS: state, runs, order, live[, hint]
-- ARGV: slot, catch_up, missed, started, lease_ms packed as five little-endian doubles, token, instance, job,
--       then the dead owners' pairs (helpers/dead.lua), if any
-- A revive claim (anarchon.backend): the slot's scheduled record, skipped for overlap, is replaced by a new
-- running run (attempt 1, the next fencing) when no run of the job holds an unexpired lease, judged as the
-- claim script's overlap check judges it (a live lease of a dead owner holds nothing). The mark, `won` and
-- the kept runs stay (one record replaced by one); nothing older is abandoned.
-- Answers {'won', fencing} for a new grant, {'won', record} for a retry with the revived run's token while
-- it runs, {'skipped', record} while a live run holds the job, {'lost', record} for any other status and
-- {'lost'} for a slot without a record.
local state, runs, order, live, hint = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local slot, catch_up, missed, started, lease = struct.unpack('<ddddd', ARGV[1])
local token, job = ARGV[2], ARGV[4]
local rid = num(slot)
local existing = redis.call('HGET', runs, rid)
if not existing then return {'lost'} end
local old = decode(existing)
if not old then return {'lost', existing} end
if old.token == token and old.status == 'running' then return {'won', existing} end
if old.status ~= 'skipped' then return {'lost', existing} end
local _, fencing, _, bad = read_state(state)
if bad then return redis.error_reply(bad) end
local now = now_ms()
local dead = read_dead(ARGV, 5)
local leases = redis.call('ZRANGE', live, 0, -1, 'WITHSCORES')
for i = 1, #leases, 2 do
  local expiry = tonumber(leases[i + 1])
  -- As in the claim script: a lease whose record is gone or unreadable, or of a dead owner, holds nothing.
  if expiry > now then
    local r = decode(redis.call('HGET', runs, leases[i]))
    if r and not owner_dead(dead, r, expiry) then return {'skipped', existing} end
  end
end
local rec = {
  job = job, slot = slot, instance = ARGV[3], manual = false, catch_up = catch_up == 1, missed = missed,
  started = started, finished = cjson.null, duration = cjson.null, error = cjson.null,
  token = token, lease = lease, attempt = 1, handed = false, status = 'running', fencing = fencing + 1
}
redis.call('ZADD', order, num(slot * 2), rid)
redis.call('ZADD', live, num(now + lease), rid)
if hint then redis.pcall('ZADD', hint, 'LT', num(now + lease), job) end
redis.call('HSET', state, 'fencing', num(rec.fencing))
redis.call('HSET', runs, rid, cjson.encode(rec))
return {'won', rec.fencing}
