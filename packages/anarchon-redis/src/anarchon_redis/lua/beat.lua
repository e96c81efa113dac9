-- KEYS: instances    ARGV: instance, ttl_ms, retain_ms
-- One heartbeat: the instance's record (a member of the sorted set, scored by alive-until on this
-- server's clock) is set to now + ttl, records dead for longer than retain are dropped, and the dead
-- ones are returned as {instance, alive_until, ...}. The drop comes first: a full Redis (maxmemory,
-- noeviction) refuses a script's first write only when it may grow memory, and lets the rest through
-- (_full.py), so beats go on and no instance presumes its runs lost while claims are refused.
local key, now = KEYS[1], now_ms()
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(now - tonumber(ARGV[3])))
redis.call('ZADD', key, num(now + tonumber(ARGV[2])), ARGV[1])
return redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. num(now), 'WITHSCORES')
