-- Cluster only. KEYS: hint    ARGV: job, lease_ms
-- Before a claim: make sure the job is looked at when a lease granted now
-- would expire. A due entry is moved too, or a take-over pass that read it
-- just before could settle it away under this claim.
local now = now_ms()
local at = now + tonumber(ARGV[2])
local cur = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not cur or cur <= now or at < cur then redis.call('ZADD', KEYS[1], num(at), ARGV[1]) end
return 1
