local function drop_if_done(runs, order, live, rid)
  if not redis.call('ZSCORE', live, rid) then
    redis.call('HDEL', runs, rid)
    redis.call('ZREM', order, rid)
  end
end
