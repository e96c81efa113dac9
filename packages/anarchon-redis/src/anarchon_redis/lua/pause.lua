-- KEYS: state. ARGV: reason, by ('' for none). Pause the job from the server's now; a job already
-- paused keeps its since. Returns since.
local state = KEYS[1]
local now = now_ms()
local since = tonumber(redis.call('HGET', state, 'paused_since'))
if not since or redis.call('HEXISTS', state, 'paused_until') == 1 then since = now end
redis.call('HDEL', state, 'paused_until')
redis.call('HSET', state, 'paused_since', num(since), 'paused_reason', ARGV[1], 'paused_by', ARGV[2])
return num(since)
