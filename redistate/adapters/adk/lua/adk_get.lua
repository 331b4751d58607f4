--[[ adk_get: one Google ADK session (redistate.adk): its state and times, and its
events as GetSessionConfig selects them, filtered here so that only those are sent.
KEYS[1..2] the session and its events, see adk_create.lua
ARGV[1]  how many of the most recent events ("-1": all, "0": none)
ARGV[2]  after_timestamp: from the newest event back, stop at the first one older than
         it (seconds); "" = no filter
returns  {} if there is no such session, else {the hash's fields and values, flat, as
         a list, but its "e:<event id>" marks (one per event: not sent); then the
         events as stored, oldest first}
errors   RSARG on malformed arguments.
unchecked hgetall llen lrange
]]
local recent, after = tonumber(ARGV[1]), ARGV[2]
if #ARGV ~= 2 or not recent or (after ~= '' and not tonumber(after)) then
  return redis.error_reply('RSARG malformed arguments to adk_get')
end
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {} end
local fields = {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) ~= 'e:' then
    fields[#fields + 1] = all[i]
    fields[#fields + 1] = all[i + 1]
  end
end
local length = redis.call('LLEN', KEYS[2])
local first = 0
if recent >= 0 then first = math.max(0, length - recent) end
if after ~= '' and first < length then
  local bound, at = tonumber(after), length - 1
  while at >= first do  -- newest first, a page at a time
    local low = math.max(first, at - 99)
    local page = redis.call('LRANGE', KEYS[2], low, at)
    for i = #page, 1, -1 do
      if tonumber(string.match(page[i], '^([^:]+):')) < bound then
        first = low + i
        at = -1
        break
      end
    end
    if at >= 0 then at = low - 1 end
  end
end
local events = {}
if first < length then events = redis.call('LRANGE', KEYS[2], first, -1) end
return {fields, events}
