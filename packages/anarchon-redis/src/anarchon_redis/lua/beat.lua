-- KEYS: instances    ARGV: instance, ttl_ms, retain_ms
-- One heartbeat: the instance's record (a member of the sorted set, scored by alive-until on this
-- server's clock) is set to now + ttl, records dead for longer than retain are dropped, and the reply
-- is {{instance, alive_until, ...} of the dead ones, ms until the first other live record expires or
-- nil}. The drop comes first: a full Redis (maxmemory, noeviction) refuses a script's first write
-- only when it may grow memory, and lets the rest through (_full.py), so beats go on and no
-- instance presumes its runs lost while claims are refused.
-- A silent store condemns nobody (anarchon.liveness.after_silence): when no beat arrived for more than
-- half a TTL (the newest record's alive-until minus the TTL), the records alive at that newest beat
-- are first renewed to now + 2 TTL.
local key, now, ttl = KEYS[1], now_ms(), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(now - tonumber(ARGV[3])))
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] then
  local last = tonumber(newest[2]) - ttl
  if now - last > ttl * 0.5 then
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, num(last), '+inf')) do
      redis.call('ZADD', key, num(now + 2 * ttl), member)
    end
  end
end
redis.call('ZADD', key, num(now + ttl), ARGV[1])
-- The first record of another live instance: the next beat is aimed just after it expires (anarchon.heartbeat).
local next_ms = false
local soon = redis.call('ZRANGEBYSCORE', key, num(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
for i = 1, #soon, 2 do
  if soon[i] ~= ARGV[1] then
    next_ms = tonumber(soon[i + 1]) - now
    break
  end
end
return {redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. num(now), 'WITHSCORES'), next_ms}
