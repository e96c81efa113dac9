-- The hint is shared by every job of the prefix: written with pcall, so a wrong type there (someone SET it)
-- stops no job; take-over then finds runs by its sweep, and the client logs the broken hint.
local function sync_hint(live, hint, job)
  if not hint then return end
  local first = redis.call('ZRANGE', live, 0, 0, 'WITHSCORES')
  if first[1] then redis.pcall('ZADD', hint, first[2], job) else redis.pcall('ZREM', hint, job) end
end
