-- KEYS: records, changes    ARGV: name
-- One stored schedule: {record, revision}, or {} when there is none (a tombstone counts as none).
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return {} end
return {record, redis.call('ZSCORE', KEYS[2], ARGV[1])}
