-- KEYS: runs, live[, hint]    ARGV: rid, token, job
local runs, live, hint = KEYS[1], KEYS[2], KEYS[3]
local rid = ARGV[1]
local rec = owned(runs, rid, ARGV[2])
if not rec then return 0 end
rec.handed = true
-- ZREM first: a full Redis refuses a script's first write only when it may grow memory (_full.py), and a
-- hand-over refused would leave the run to wait out its lease.
redis.call('ZREM', live, rid)
redis.call('HSET', runs, rid, cjson.encode(rec))
redis.call('ZADD', live, num(now_ms()), rid)
sync_hint(live, hint, ARGV[3])
return 1
