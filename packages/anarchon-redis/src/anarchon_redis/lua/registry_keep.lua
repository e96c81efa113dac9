-- KEYS: seen    ARGV: instance, ttl_ms
-- Keep the instance's entry live until now + ttl; an entry that is gone stays gone (it registers again).
return redis.call('ZADD', KEYS[1], 'XX', 'CH', num(now_ms() + tonumber(ARGV[2])), ARGV[1])
