-- KEYS: trail (a stream), counter
-- ARGV: job, entry, keep
-- One audit entry, appended: its id is the counter's next value (the stream entry "<id>-0"), so ids
-- are whole numbers that only grow. The stream is trimmed to about `keep` entries on the way
-- (MAXLEN ~: whole macro nodes only, so at least `keep` stay, for O(1) work). A counter lost while
-- the stream stayed (a key deleted by hand) is moved past the stream's last id, never back.
local trail, counter = KEYS[1], KEYS[2]
local id = redis.call('INCR', counter)
local last = redis.call('XREVRANGE', trail, '+', '-', 'COUNT', 1)[1]
if last then
  local top = tonumber(string.match(last[1], '^(%d+)'))
  if top >= id then
    id = top + 1
    redis.call('SET', counter, id)
  end
end
redis.call('XADD', trail, 'MAXLEN', '~', ARGV[3], id .. '-0', 'job', ARGV[1], 'entry', ARGV[2])
return id
