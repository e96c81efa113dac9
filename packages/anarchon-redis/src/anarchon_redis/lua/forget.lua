-- KEYS: state, runs, order, live
-- ARGV: in_use_above (a mark above it is a slot claimed well after the removal: the name is used again)
-- A removed schedule's job keys go (anarchon.backend.Backend.forget_removed) unless the name is in use:
-- a lease in `live` not yet expired, or a mark above ARGV[1]. Answers 1 when forgotten, 0 when kept.
local state, runs, order, live = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if #redis.call('ZRANGEBYSCORE', live, '(' .. num(now_ms()), '+inf', 'LIMIT', 0, 1) > 0 then return 0 end
local mark = tonumber(redis.call('HGET', state, 'mark') or '')
if mark and mark > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', state, runs, order, live)
return 1
