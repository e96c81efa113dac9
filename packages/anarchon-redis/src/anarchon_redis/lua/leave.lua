-- KEYS: instances    ARGV: instance
-- A clean stop: the record, if there is one, ends now, so the instance's leftover runs are taken over
-- at once: every one was granted at or before now (dead.lua compares with <=). LT never moves a record
-- that is already older.
redis.call('ZADD', KEYS[1], 'XX', 'LT', num(now_ms()), ARGV[1])
return 1
