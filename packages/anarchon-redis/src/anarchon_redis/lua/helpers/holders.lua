-- Concurrency groups (anarchon_redis._groups): an entry's value is '<instance> <token>' (an instance id
-- has no space; the token is the rest, whatever it holds). A value without a space (not ours) is read
-- as a holder with an empty token.
local function holder_of(v) return (string.match(v, '^[^ ]*')) end
local function token_of(v)
  local at = string.find(v, ' ', 1, true)
  return at and string.sub(v, at + 1) or ''
end
-- Whether a place's holder is dead (anarchon._memory_groups.holder_dead): its heartbeat record in
-- `instances` expired while some record is alive, or it has none (an instance beats before it claims,
-- so one without a record was dead long enough for beat.lua to drop it). The silence rule of beat.lua
-- holds here too: when every record expired, the store was silent, not the fleet. Judged once per
-- instance and call.
local function holders(instances, now)
  local newest = tonumber(redis.call('ZRANGE', instances, -1, -1, 'WITHSCORES')[2])
  local judged = {}
  return function(instance)
    local dead = judged[instance]
    if dead == nil then
      local untl = tonumber(redis.call('ZSCORE', instances, instance))
      dead = not untl or (untl < now and now <= newest)
      judged[instance] = dead
    end
    return dead
  end
end
