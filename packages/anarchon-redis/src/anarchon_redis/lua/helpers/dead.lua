-- Liveness (see anarchon_redis._liveness). The owners this instance's latest heartbeat reported dead
-- come as pairs (instance, alive_until in epoch ms) of the script's `argv` from `first` on (passed in:
-- inside CLAIM_MANY each claim has its own), and only when there are any:
-- the common case passes none and pays nothing. A script cannot read the instances key itself, which
-- lives in another cluster slot.
local function read_dead(argv, first)
  if #argv < first + 1 then return nil end
  local dead = {}
  for i = first, #argv - 1, 2 do dead[argv[i]] = tonumber(argv[i + 1]) end
  return dead
end
-- A running run whose lease runs to `expiry` counts as dead when its owner is listed and the run was
-- last granted or renewed (expiry - lease) no later than the owner's record ended: a run the owner took
-- after its record came back (a beat that found it dead, so later than its end) is not condemned by a
-- stale list. At the same millisecond counts as before: a leave() right after a claim ends the record
-- in the claim's millisecond.
local function owner_dead(dead, r, expiry)
  if not dead then return false end
  local seen = dead[r.instance]
  return seen ~= nil and expiry - r.lease <= seen
end
