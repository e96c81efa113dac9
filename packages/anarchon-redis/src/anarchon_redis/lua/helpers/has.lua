-- Whether a stored record has this field with this JSON value, read without decoding it. Exact: cjson
-- escapes every quote inside a string, so '"name":' occurs only as a key, and the value is followed by ','
-- or '}'.
local function has(raw, name, value)
  local at = '"' .. name .. '":' .. value
  return string.find(raw, at .. ',', 1, true) ~= nil or string.find(raw, at .. '}', 1, true) ~= nil
end
