-- KEYS: heads, seen[, instances]
-- {now, entries, beats} by this server's clock: entries {instance, head, expires, ...} for every entry,
-- beats {instance, alive_until, ...} from the heartbeat set when it is given (one server: one round trip
-- for the whole read). Which entries are live the caller decides with the beats: an expired entry of a
-- beating instance is. On a cluster the heartbeat set is in another hash slot: the caller reads it apart.
local now = now_ms()
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '+inf', 'WITHSCORES')
local entries = {}
-- One HMGET per thousand entries, not one HGET each: the read is one command whatever the fleet's size
-- (an HGET per entry made every instance's read grow with the fleet, the fleet's with its square).
for first = 1, #live, 2000 do
  local ids = {}
  for i = first, math.min(first + 1999, #live), 2 do ids[#ids + 1] = live[i] end
  local heads = redis.call('HMGET', KEYS[1], unpack(ids))
  for k = 1, #ids do
    if heads[k] then
      entries[#entries + 1] = ids[k]
      entries[#entries + 1] = heads[k]
      entries[#entries + 1] = live[first + 2 * k - 1]
    end
  end
end
local beats = {}
if KEYS[3] then beats = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '+inf', 'WITHSCORES') end
return {num(now), entries, beats}
