-- The loop of many() (_scripts.py): ARGV starts with the keys and the arguments per call; the
-- shared hint is the last key. Each call runs in pcall, so an error on one job's keys is that
-- call's reply alone, as in a pipeline; a plain loss comes back as 0 (the commonest answer,
-- and the cheapest to parse). Appended after `local function one(KEYS, ARGV) ... end`; what the
-- calls told (helpers/tell.lua) goes out once, at the end.
local per_keys, per_args = tonumber(ARGV[1]), tonumber(ARGV[2])
local calls = (#ARGV - 2) / per_args
local hint = #KEYS > calls * per_keys and KEYS[#KEYS] or nil
local out = {}
for i = 0, calls - 1 do
  local keys, args = {}, {}
  for j = 1, per_keys do keys[j] = KEYS[i * per_keys + j] end
  keys[per_keys + 1] = hint
  for j = 1, per_args do args[j] = ARGV[2 + i * per_args + j] end
  local ok, reply = pcall(one, keys, args)
  if not ok then
    reply = type(reply) == 'table' and reply.err and reply or {err = tostring(reply)}
  elseif type(reply) == 'table' and reply[1] == 'lost' and #reply == 1 then
    reply = 0
  end
  out[#out + 1] = reply
end
send_told()
return out
