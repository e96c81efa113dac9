-- Notices a script sends, gathered per channel and published once at its end by send_told(): a
-- many() script of a few hundred claims (_scripts.py) sends one message to every subscriber, its
-- lines joined by newlines, not one per claim (1,000 every-second jobs were 1,000 messages a
-- second to each instance, which its event loop could not read before the later ranks' claims).
local told, told_channels = {}, {}
local function tell(channel, line)
  local lines = told[channel]
  if not lines then
    lines = {}
    told[channel] = lines
    told_channels[#told_channels + 1] = channel
  end
  lines[#lines + 1] = line
end
local function send_told()
  for _, channel in ipairs(told_channels) do redis.call('PUBLISH', channel, table.concat(told[channel], '\n')) end
end
