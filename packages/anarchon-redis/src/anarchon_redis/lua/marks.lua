-- KEYS: the jobs' state hashes (one server). Each job's mark, or nil for none; a key of another type is
-- that job's error alone (pcall), as in a pipeline. One reply for a chunk of jobs where a pipeline of
-- HGETs made one each: at a start with 100,000 stored schedules the client spent seconds parsing those.
local out = {}
for i, key in ipairs(KEYS) do
  local ok, value = pcall(redis.call, 'HGET', key, 'mark')
  if ok then
    out[i] = value
  else
    out[i] = {err = type(value) == 'table' and value.err or tostring(value)}
  end
end
return out
