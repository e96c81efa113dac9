-- KEYS: runs, order    ARGV: limit
local out = {}
for _, rid in ipairs(redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)) do
  local raw = redis.call('HGET', KEYS[1], rid)
  if raw then out[#out + 1] = raw end
end
return out
