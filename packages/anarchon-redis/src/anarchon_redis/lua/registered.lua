-- KEYS: heads, seen
-- The live entries: {now, instance, head, expires, ...}, by this server's clock.
local now = now_ms()
local live = redis.call('ZRANGEBYSCORE', KEYS[2], num(now), '+inf', 'WITHSCORES')
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
