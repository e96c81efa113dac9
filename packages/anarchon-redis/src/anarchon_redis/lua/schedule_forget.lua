-- KEYS: changes, removed, logs
-- ARGV: cutoff_ms, then names
-- The tombstones of these names go with their logs, each only if it is still a tombstone removed at or
-- before the cutoff (a name added again meanwhile left `removed` and keeps its entry in `changes`).
local changes, removed, logs = KEYS[1], KEYS[2], KEYS[3]
local cutoff = tonumber(ARGV[1])
for i = 2, #ARGV do
  local at = redis.call('ZSCORE', removed, ARGV[i])
  if at and tonumber(at) <= cutoff then
    redis.call('ZREM', changes, ARGV[i])
    redis.call('ZREM', removed, ARGV[i])
    redis.call('HDEL', logs, ARGV[i])
  end
end
return #ARGV - 1
