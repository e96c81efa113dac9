-- Numbers are formatted with %d: Lua's own tostring keeps only 14 digits.
local function num(x) return string.format('%d', x) end
