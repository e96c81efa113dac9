-- KEYS: state, runs, live[, hint]    ARGV: instance, max_attempts, lease_ms, nonce, job, then the dead
-- owners' pairs (helpers/dead.lua), if any: their runs count as expired whatever their lease says.
-- Returns {next lease expiry or nil, granted records...}. Runs already granted
-- under this nonce are returned again, so a retried call loses nothing.
local state, runs, live, hint = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local instance, max_attempts, lease, nonce = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
-- The newest run is the newest slot won: a slot skipped for a dead run moved the mark but ran nothing.
local _, fencing, won, bad = read_state(state)
if bad then return redis.error_reply(bad) end
local now = now_ms()
local out = {false}
local mine = nonce .. ':'
for _, rid in ipairs(redis.call('ZRANGEBYSCORE', live, '(' .. num(now), '+inf')) do
  local raw = redis.call('HGET', runs, rid)
  local r = decode(raw)
  if r and string.sub(r.token, 1, #mine) == mine then out[#out + 1] = raw end
end
local dead = read_dead(ARGV, 6)
-- Without dead owners only the expired leases; with them every lease, each judged below.
local leases = dead and redis.call('ZRANGE', live, 0, -1, 'WITHSCORES')
  or redis.call('ZRANGEBYSCORE', live, '-inf', num(now), 'WITHSCORES')
for i = 1, #leases, 2 do
  local rid, expiry = leases[i], tonumber(leases[i + 1])
  local r = decode(redis.call('HGET', runs, rid))
  if not r then
    redis.call('ZREM', live, rid)  -- gone or unreadable: nothing to run; history skips what is left
  elseif expiry <= now or owner_dead(dead, r, expiry) then
    local newest = r.manual or r.slot == won
    if not newest or (r.attempt >= max_attempts and not r.handed) then
      r.status = 'abandoned'
      redis.call('ZREM', live, rid)
      redis.call('HSET', runs, rid, cjson.encode(r))
    else
      fencing = fencing + 1
      redis.call('HSET', state, 'fencing', num(fencing))
      -- a hand-over is no death: the run goes on as the same attempt
      if not r.handed then
        -- the attempt that died, kept in the record (oldest first): history shows every attempt
        local earlier = type(r.earlier) == 'table' and r.earlier or {}
        earlier[#earlier + 1] = {attempt = r.attempt, instance = r.instance, fencing = r.fencing, started = r.started}
        r.earlier, r.attempt = earlier, r.attempt + 1
      end
      r.token, r.handed, r.lease, r.instance = mine .. num(fencing), false, lease, instance
      r.fencing, r.started = fencing, now
      local raw = cjson.encode(r)
      redis.call('HSET', runs, rid, raw)
      redis.call('ZADD', live, num(now + lease), rid)
      out[#out + 1] = raw
    end
  end
end
sync_hint(live, hint, ARGV[5])
out[1] = next_expiry(live)
return out
