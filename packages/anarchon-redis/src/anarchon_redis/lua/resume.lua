-- KEYS: state. End the job's pause at the server's now (the stored interval stays: the slots due during
-- it stay paused). Returns {since, until, reason, by}, or false when the job was not paused.
local state = KEYS[1]
local since = tonumber(redis.call('HGET', state, 'paused_since'))
if not since or redis.call('HEXISTS', state, 'paused_until') == 1 then return false end
local untl = math.max(now_ms(), since)
redis.call('HSET', state, 'paused_until', num(untl))
local rest = redis.call('HMGET', state, 'paused_reason', 'paused_by')
return {num(since), num(untl), rest[1] or '', rest[2] or ''}
