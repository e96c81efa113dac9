-- Cluster only. KEYS: hint    ARGV: job, seen expiry ('' = sweep), next expiry ('' = none)
-- After a take-over pass: record the job's true next expiry, unless a claim
-- touched the entry since the pass read it (then that claim's entry stays).
local job, seen, nxt = ARGV[1], ARGV[2], ARGV[3]
local cur = tonumber(redis.call('ZSCORE', KEYS[1], job))
if seen == '' then
  if nxt ~= '' and (not cur or tonumber(nxt) < cur) then redis.call('ZADD', KEYS[1], nxt, job) end
  return 1
end
if cur and cur == tonumber(seen) then
  if nxt == '' then redis.call('ZREM', KEYS[1], job) else redis.call('ZADD', KEYS[1], nxt, job) end
end
return 1
