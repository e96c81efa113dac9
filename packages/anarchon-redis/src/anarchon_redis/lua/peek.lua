-- KEYS: live    How many runs of the job hold a lease: a sweep looks closer only at those.
return redis.call('ZCARD', KEYS[1])
