-- KEYS: instances, then three keys per group: places, waiting, running (as in places.lua)
-- Each group's live places: {has entries (1/0), running, waiting, oldest waiting slot or false}, counting
-- only entries whose holder is alive (helpers/holders.lua). Reads every entry: an operator's view.
local dead = holders(KEYS[1], now_ms())
local out = {}
for at = 2, #KEYS, 3 do
  local places, waiting, running = KEYS[at], KEYS[at + 1], KEYS[at + 2]
  local held, queued, oldest = 0, 0, false
  for _, id in ipairs(redis.call('SMEMBERS', running)) do
    local v = redis.call('HGET', places, id)
    if v and not dead(holder_of(v)) then held = held + 1 end
  end
  local line = redis.call('ZRANGE', waiting, 0, -1, 'WITHSCORES')
  for i = 1, #line, 2 do
    local v = redis.call('HGET', places, line[i])
    if v and not dead(holder_of(v)) then
      queued = queued + 1
      oldest = oldest or line[i + 1]
    end
  end
  out[#out + 1] = {redis.call('EXISTS', places), held, queued, oldest}
end
return out
