-- The job's state hash: mark, fencing, won, or an error text when one of them is not an integer. Such a
-- state is refused before anything is written (a script's writes are not undone by a later error): the
-- mark guards against re-running old slots and the fencing token must only grow, so neither is guessed.
-- A job without a counter starts it at the clock in ms (anarchon.backend.fencing_floor), so a
-- Redis restarted empty never hands out a lower token.
local function read_state(state)
  local st = redis.call('HMGET', state, 'mark', 'fencing', 'won')
  local mark, fencing, won = tonumber(st[1]), tonumber(st[2]), tonumber(st[3])
  if (st[1] and not mark) or (st[2] and not fencing) or (st[3] and not won) then
    return nil, nil, nil, 'ANARCHON the state hash ' .. state .. ' holds a mark, fencing or won that is not '
      .. 'an integer; fix or delete it (deleting it resets the job\'s mark and fencing)'
  end
  return mark, fencing or now_ms(), won, nil
end
