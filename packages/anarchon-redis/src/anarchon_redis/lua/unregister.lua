-- KEYS: heads, jobs, seen    ARGV: instance
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[3], ARGV[1])
