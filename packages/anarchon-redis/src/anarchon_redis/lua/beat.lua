-- KEYS: instances    ARGV: instance, ttl_ms, retain_ms
-- One heartbeat: the instance's record (a member of the sorted set, scored by alive-until on this
-- server's clock) is set to now + ttl, records dead for longer than retain are dropped, and the dead
-- ones are returned as {instance, alive_until, ...}.
local key, now = KEYS[1], now_ms()
redis.call('ZADD', key, num(now + tonumber(ARGV[2])), ARGV[1])
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(now - tonumber(ARGV[3])))
return redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. num(now), 'WITHSCORES')
