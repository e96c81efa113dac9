-- KEYS: heads, seen
-- Every entry: {now, instance, head, expires, ...}, by this server's clock. Which are live the caller
-- decides with the heartbeats (another hash slot on a cluster): an expired entry of a beating instance is.
local now = now_ms()
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '+inf', 'WITHSCORES')
local out = {num(now)}
for i = 1, #live, 2 do
  local head = redis.call('HGET', KEYS[1], live[i])
  if head then
    out[#out + 1] = live[i]
    out[#out + 1] = head
    out[#out + 1] = live[i + 1]
  end
end
return out
