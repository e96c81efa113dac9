local function trim(runs, order, live, size, ttl, now)
  for _, rid in ipairs(redis.call('ZREVRANGE', order, size, -1)) do drop_if_done(runs, order, live, rid) end
  if ttl > 0 then
    for _, rid in ipairs(redis.call('ZRANGEBYSCORE', order, '-inf', '(' .. num(2 * (now - ttl)))) do
      drop_if_done(runs, order, live, rid)
    end
  end
end
