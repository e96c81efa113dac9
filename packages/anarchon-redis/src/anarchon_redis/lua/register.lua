-- KEYS: heads, jobs, seen    ARGV: instance, head, jobs, ttl_ms, retain_ms
-- The instance's registry entry: its head and job definitions, live until now + ttl on this server's
-- clock. Entries expired for longer than retain are dropped on the way.
local heads, jobs, seen, now = KEYS[1], KEYS[2], KEYS[3], now_ms()
local stale = redis.call('ZRANGEBYSCORE', seen, '-inf', '(' .. num(now - tonumber(ARGV[5])))
for _, instance in ipairs(stale) do
  redis.call('HDEL', heads, instance)
  redis.call('HDEL', jobs, instance)
  redis.call('ZREM', seen, instance)
end
redis.call('HSET', heads, ARGV[1], ARGV[2])
redis.call('HSET', jobs, ARGV[1], ARGV[3])
redis.call('ZADD', seen, num(now + tonumber(ARGV[4])), ARGV[1])
return 1
