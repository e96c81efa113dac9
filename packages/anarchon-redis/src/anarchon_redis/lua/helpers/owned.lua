local function owned(runs, rid, token)
  local rec = decode(redis.call('HGET', runs, rid))
  if not rec or rec.token ~= token or rec.status ~= 'running' then return nil end
  return rec
end
