-- A stored run record, or nil for one this version did not write (not JSON, or a field of the wrong type):
-- such a record is left for history to skip, and never stops the job's scripts.
local function decode(raw)
  if not raw then return nil end
  local ok, r = pcall(cjson.decode, raw)
  if not ok or type(r) ~= 'table' or type(r.slot) ~= 'number' or r.slot ~= r.slot or math.abs(r.slot) > 2^53
    or type(r.token) ~= 'string' or type(r.status) ~= 'string' or type(r.attempt) ~= 'number'
    or type(r.lease) ~= 'number' or (r.manual ~= true and r.manual ~= false) then
    return nil
  end
  return r
end
