-- KEYS: requests. ARGV: ttl_ms. The requests younger than the TTL (server clock), oldest first.
return redis.call('ZRANGEBYSCORE', KEYS[1], num(now_ms() - tonumber(ARGV[1])), '+inf')
