-- KEYS: runs, live[, hint]    ARGV: rid, token, final record, job
-- The final record comes as JSON with ``fin`` but without the closing brace: the script adds
-- ``token`` (encoded here, as every stored token is), ``lease`` and ``handed`` from the stored
-- record, and ``earlier`` when it has one. A retry of a finish that already went through answers 1
-- again (``fin``). Nothing is decoded but the record of a run taken over: half of what a finish cost
-- was JSON work.
local runs, live, hint = KEYS[1], KEYS[2], KEYS[3]
local rid, token = ARGV[1], cjson.encode(ARGV[2])
local raw = redis.call('HGET', runs, rid)
if not raw or not has(raw, 'token', token) then return 0 end
if not has(raw, 'status', '"running"') then
  if has(raw, 'fin', 'true') then return 1 end
  return 0
end
local lease = string.match(raw, '"lease":(%-?[0-9.eE+]+)[,}]')
if not lease then return 0 end
local handed = has(raw, 'handed', 'true') and 'true' or 'false'
-- The attempts a take-over replaced (take_over.lua), kept. '"earlier":' occurs only as a key (has.lua).
local earlier = ''
if string.find(raw, '"earlier":', 1, true) then
  local ok, r = pcall(cjson.decode, raw)
  if ok and type(r) == 'table' and type(r.earlier) == 'table' then
    earlier = ',"earlier":' .. cjson.encode(r.earlier)
  end
end
-- ZREM first: a full Redis refuses a script's first write only when it may grow memory (_full.py). A finish
-- refused leaves the run 'running' until Redis has room: its job's next slots skip for it, and if its
-- instance stops meanwhile it is taken over and run again.
redis.call('ZREM', live, rid)
redis.call('HSET', runs, rid,
  ARGV[3] .. ',"token":' .. token .. ',"lease":' .. lease .. ',"handed":' .. handed .. earlier .. '}')
sync_hint(live, hint, ARGV[4])
return 1
