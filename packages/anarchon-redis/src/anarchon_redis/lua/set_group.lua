-- KEYS: limits    ARGV: group, limit ('' removes it: no limit), channel
-- A group's limit, and the notice to the watchers (capability group_notify) in the same step: a raised
-- limit lets waiting runs start at once.
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
