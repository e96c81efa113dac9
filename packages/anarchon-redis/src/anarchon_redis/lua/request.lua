-- KEYS: requests (sorted set of "slot:job:by" by slot). ARGV: job, by, ttl_ms.
-- Store a run request at the server's now, one millisecond later per request already there for the job.
local key, job = KEYS[1], ARGV[1]
local now = now_ms()
local slot = now
while true do
  local head = num(slot) .. ':' .. job .. ':'
  local taken = false
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, slot, slot)) do
    if string.sub(m, 1, #head) == head then taken = true end
  end
  if not taken then break end
  slot = slot + 1
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. num(now - tonumber(ARGV[3])))
redis.call('ZADD', key, num(slot), num(slot) .. ':' .. job .. ':' .. ARGV[2])
return num(slot)
