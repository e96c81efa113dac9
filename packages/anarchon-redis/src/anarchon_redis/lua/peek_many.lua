-- KEYS: live of each job in a sweep slice (one server only: the keys are in many slots).
-- Returns the positions (1-based) of the jobs holding a lease, a negative one where the
-- key cannot be read (a wrong type): one call for a slice instead of one per job.
local out = {}
for i, key in ipairs(KEYS) do
  local n = redis.pcall('ZCARD', key)
  if type(n) == 'table' then
    out[#out + 1] = -i
  elseif n > 0 then
    out[#out + 1] = i
  end
end
return out
