-- KEYS: revision, records, changes, removed, logs
-- ARGV: name, record ('' for a removal), removal ('1' or '0'), expect ('' for any), change, tombstone_ms, log_keep,
--       channel ('' or absent: none)
-- One stored-schedule change, atomic: tombstones older than tombstone_ms go (with their logs); the
-- schedule's current revision (0: none, or a tombstone) is checked against expect; then the counter
-- moves on, the record (or tombstone) is written under it, and the change is appended to the log.
-- A refusal writes nothing but the purge and answers {0, current}; a change answers {1, revision}, and
-- publishes the revision on the channel, for every instance's subscription (capability schedule_notify).
local revision, records, changes, removed, logs = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local name, removal, expect = ARGV[1], ARGV[3] == '1', ARGV[4]
local now = now_ms()
local old = redis.call('ZRANGEBYSCORE', removed, '-inf', '(' .. num(now - tonumber(ARGV[6])))
for _, gone in ipairs(old) do
  redis.call('ZREM', changes, gone)
  redis.call('ZREM', removed, gone)
  redis.call('HDEL', logs, gone)
end
local current = 0
if redis.call('HEXISTS', records, name) == 1 then
  current = tonumber(redis.call('ZSCORE', changes, name) or '0')
end
if (expect ~= '' and tonumber(expect) ~= current) or (removal and current == 0) then
  return {0, current}
end
local rev = redis.call('INCR', revision)
if removal then
  redis.call('HDEL', records, name)
  redis.call('ZADD', removed, num(now), name)
else
  redis.call('HSET', records, name, ARGV[2])
  redis.call('ZREM', removed, name)
end
redis.call('ZADD', changes, num(rev), name)
local log = {}
local held = redis.call('HGET', logs, name)
if held then log = cjson.decode(held) end
table.insert(log, {rev, ARGV[5]})
local keep = tonumber(ARGV[7])
while #log > keep do table.remove(log, 1) end
redis.call('HSET', logs, name, cjson.encode(log))
if ARGV[8] and ARGV[8] ~= '' then
  redis.call('PUBLISH', ARGV[8], rev)
end
return {1, rev}
