-- KEYS: instances, limits, named, then four keys per group: places, waiting, running, holders
-- ARGV: channel, number of groups G, number of leaves L, the G group names (in KEYS' order), L leaves
--       (group number, id, token), then the asks (group number, id, slot, instance, token)
-- places() in one step, as anarchon._memory_groups.MemoryGroups.places (the reference): the leaves,
-- then the asks, then each group asked in drops its dead holders' entries and hands out its free places.
-- A group's `places` hash holds every entry (id -> '<instance> <token>'), `running` the ids holding a
-- place, `waiting` the others scored by slot, and `holders` every '<instance> <id>' (score 0, read by
-- range). An id is '<job> <slot> <0|1 manual>', so equal slots sort by job, then scheduled before manual
-- (' ' sorts before every character of a name). Returns 1 or 0 per ask: whether its entry holds a place.
local instances, limits, named = KEYS[1], KEYS[2], KEYS[3]
local channel, ngroups, nleaves = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local dead = holders(instances, now)
local function keys_of(g)
  local at = 3 + (g - 1) * 4
  return KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4]
end
-- A limit that is not a whole number is refused before anything is written: read as none, it would
-- lift the limit.
local limit_of = {}
for g = 1, ngroups do
  local raw = redis.call('HGET', limits, ARGV[3 + g])
  limit_of[g] = tonumber(raw)
  if raw and not limit_of[g] then
    return redis.error_reply('ANARCHON the limit of group ' .. ARGV[3 + g] .. ' in ' .. limits .. ' is not a '
      .. 'number; set it again (anarchon groups set) or delete that field')
  end
end
-- The leaves come first (deletes only: a full Redis lets them through, as beat.lua's drop).
local at, told = 3 + ngroups, {}
for _ = 1, nleaves do
  local g, id, token = tonumber(ARGV[at + 1]), ARGV[at + 2], ARGV[at + 3]
  at = at + 3
  local places, waiting, running, held = keys_of(g)
  local v = redis.call('HGET', places, id)
  if v and token_of(v) == token then
    redis.call('HDEL', places, id)
    redis.call('ZREM', waiting, id)
    redis.call('SREM', running, id)
    redis.call('ZREM', held, holder_of(v) .. ' ' .. id)
    told[g] = true
  end
end
-- Each ask's entry: kept while its token is the stored one, else stored anew, waiting (a take-over).
local asks, mine = {}, {}
while at < #ARGV do
  local g, id, slot, instance, token = tonumber(ARGV[at + 1]), ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5]
  at = at + 5
  local places, waiting, running, held = keys_of(g)
  local v = redis.call('HGET', places, id)
  if not v or token_of(v) ~= token then
    if v then redis.call('ZREM', held, holder_of(v) .. ' ' .. id) else redis.call('SADD', named, ARGV[3 + g]) end
    redis.call('HSET', places, id, instance .. ' ' .. token)
    redis.call('ZADD', held, 0, instance .. ' ' .. id)
    redis.call('SREM', running, id)
    redis.call('ZADD', waiting, slot, id)
  end
  asks[#asks + 1] = {g, id}
  mine[g] = mine[g] or {}
  mine[g][id] = true
end
-- A group asked in: every entry of a dead holder goes, found by holder (one range read per instance
-- holding entries in the group, skipping from one to the next), not by reading every entry. Then the
-- oldest waiting entries get the free places, whoever asked: the cost is the group's holders and the
-- places given, not its queue. A place given to an entry no ask of this call named is told, so its
-- holder asks at once rather than at its next poll.
for g = 1, ngroups do
  if mine[g] then
    local places, waiting, running, held = keys_of(g)
    local from = '-'
    while true do
      local first = redis.call('ZRANGEBYLEX', held, from, '+', 'LIMIT', 0, 1)[1]
      if not first then break end
      local instance = holder_of(first)
      -- an instance id has no space nor '!': its members are exactly those from '<instance> ' to '<instance>!'
      if dead(instance) then
        for _, member in ipairs(redis.call('ZRANGEBYLEX', held, '[' .. instance .. ' ', '(' .. instance .. '!')) do
          local id = token_of(member)
          redis.call('HDEL', places, id)
          redis.call('ZREM', waiting, id)
          redis.call('SREM', running, id)
        end
        redis.call('ZREMRANGEBYLEX', held, '[' .. instance .. ' ', '(' .. instance .. '!')
      end
      from = '[' .. instance .. '!'
    end
    local free = limit_of[g] and limit_of[g] - redis.call('SCARD', running)  -- nil: no limit
    if not free or free > 0 then
      local given = redis.call('ZRANGE', waiting, 0, (free or 0) - 1)
      for _, id in ipairs(given) do
        redis.call('SADD', running, id)
        if not mine[g][id] then told[g] = true end
      end
      if #given > 0 then redis.call('ZREMRANGEBYRANK', waiting, 0, #given - 1) end
    end
  end
end
local names = {}
for g = 1, ngroups do
  local places = keys_of(g)
  if redis.call('EXISTS', places) == 0 then redis.call('SREM', named, ARGV[3 + g]) end
  if told[g] then names[#names + 1] = ARGV[3 + g] end
end
-- The watchers (capability group_notify) hear the groups with a freed place, in this step.
if #names > 0 then redis.call('PUBLISH', channel, table.concat(names, ' ')) end
local out = {}
for i, ask in ipairs(asks) do
  local _, _, running = keys_of(ask[1])
  out[i] = redis.call('SISMEMBER', running, ask[2])
end
return out
