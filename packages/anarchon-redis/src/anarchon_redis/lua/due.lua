-- KEYS: hint    Returns {job, expiry, job, expiry, ...} of the jobs whose earliest lease expired.
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', num(now_ms()), 'WITHSCORES')
