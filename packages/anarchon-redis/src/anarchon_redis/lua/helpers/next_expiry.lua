local function next_expiry(live)
  local first = redis.call('ZRANGE', live, 0, 0, 'WITHSCORES')
  return first[2] or false
end
