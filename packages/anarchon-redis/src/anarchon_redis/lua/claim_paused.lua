-- KEYS: state, runs, order, live
-- ARGV: slot, token, instance, job, started, catch_up (0/1), missed, lease_ms, history_size, history_ttl_ms (0 = none)
-- A scheduled claim of a job the caller believes paused. nil (false) when the stored pause does not
-- cover the slot (never paused, or resumed before it): the caller claims it as usual. Otherwise the
-- slot is decided here: recorded 'paused' once, moving the mark (not won, not fencing).
local state, runs, order, live = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local slot, token = tonumber(ARGV[1]), ARGV[2]
local since = tonumber(redis.call('HGET', state, 'paused_since'))
if not since then return false end
local untl = tonumber(redis.call('HGET', state, 'paused_until'))
if untl and (slot < since or slot > untl) then return false end
local rid = num(slot)
local existing = redis.call('HGET', runs, rid)
if existing then
  local rec = decode(existing)
  if rec and rec.token == token and rec.status == 'paused' then return {'paused', existing} end
  return {'lost'}
end
local mark = tonumber(redis.call('HGET', state, 'mark'))
if mark and slot <= mark then return {'lost'} end
local now = now_ms()
local started = tonumber(ARGV[5])
local rec = {
  job = ARGV[4], slot = slot, instance = ARGV[3], manual = false, catch_up = ARGV[6] == '1',
  missed = tonumber(ARGV[7]), started = started, finished = started, duration = 0, error = cjson.null,
  token = token, lease = tonumber(ARGV[8]), attempt = 1, handed = false, status = 'paused', fencing = cjson.null
}
local raw = cjson.encode(rec)
redis.call('ZADD', order, num(slot * 2), rid)
redis.call('HSET', runs, rid, raw)
redis.call('HSET', state, 'mark', rid)
trim(runs, order, live, tonumber(ARGV[9]), tonumber(ARGV[10]), now)
return {'paused', raw}
