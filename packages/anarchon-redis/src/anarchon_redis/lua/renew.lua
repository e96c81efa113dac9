-- KEYS: runs, live[, hint]    ARGV: rid, token, job
local runs, live, hint = KEYS[1], KEYS[2], KEYS[3]
local rec = owned(runs, ARGV[1], ARGV[2])
if not rec or rec.handed then return 0 end
-- ZREM, then ZADD: a full Redis refuses a script's first write only when it may grow memory (_full.py);
-- a renewal only moves a score, and refused it would stop a run that holds its lease.
redis.call('ZREM', live, ARGV[1])
redis.call('ZADD', live, num(now_ms() + rec.lease), ARGV[1])
sync_hint(live, hint, ARGV[3])
return 1
