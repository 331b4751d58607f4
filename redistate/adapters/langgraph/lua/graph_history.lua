--[[ graph_history: the pending writes to some channels along the parent chain of one
checkpoint, and each channel's nearest stored value, in one step
(get_delta_channel_history). The walk is BaseCheckpointSaver's: from the target's
parent up, each checkpoint's writes to the channels still walked for, then the
channels whose value that checkpoint stores ("empty" is none) stop there; it ends
when no channel is left, at a checkpoint without parent, or at one not stored.
KEYS[1..7] the thread's keys, see _graph.lua
ARGV[1]  the upper end of the target's range (graph_read's, newest first: "[<m>" for
         one checkpoint, "[<ns>\0\255" for the namespace's latest)
ARGV[2]  the lower end
ARGV[3]  ttl in ms to restart on every key of the thread when the target is found
         (the saver's refresh_on_read); "0": a read leaves the expiry as it is
ARGV[4…] the channels, each once (at least one)
returns  {write fields, write values, channel numbers, values}: the writes to those
         channels, oldest checkpoint first, each checkpoint's in the order of its
         fields; for each channel that stopped at a stored value, its number n (the
         channel is ARGV[3 + n]) and that packed value. All empty if there is no target.
errors   RSARG on malformed arguments; RSINTEGRITY if a checkpoint on the chain is its
         own ancestor or is not a packed value. Both before any write.
unchecked hget hmget zrangebylex zrevrangebylex
]]
local ttl_ms = rs_ttl(ARGV[3] or '')
if not ttl_ms or #ARGV < 4 then
  return redis.error_reply('RSARG malformed arguments to graph_history')
end
local walked, left = {}, 0  -- channel -> its number, while the walk goes on for it
for i = 4, #ARGV do
  if walked[ARGV[i]] then
    return redis.error_reply('RSARG malformed arguments to graph_history')
  end
  walked[ARGV[i]] = i - 3
  left = left + 1
end

-- Part n of a value graph.py's pack() made ("<length>:<bytes>" each); nil if malformed.
local function part(data, n)
  local at = 1
  for i = 1, n do
    local colon = string.find(data, ':', at, true)
    if not colon or not string.match(string.sub(data, at, colon - 1), '^%d+$') then
      return nil
    end
    local stop = colon + tonumber(string.sub(data, at, colon - 1))
    if stop > #data then return nil end
    if i == n then return string.sub(data, colon + 1, stop) end
    at = stop + 1
  end
end

-- <m> named without its NUL: an error reply ends at the first one.
local function corrupt(m)
  local at = string.find(m, '\0', 1, true)
  return redis.error_reply('RSINTEGRITY checkpoint ' .. string.sub(m, at + 1) ..
    ' (namespace "' .. string.sub(m, 1, at - 1) .. '") of ' .. KEYS[1] ..
    ' is its own ancestor or not a packed value')
end

local m = redis.call('ZREVRANGEBYLEX', KEYS[2], ARGV[1], ARGV[2], 'LIMIT', 0, 1)[1]
local packed = m and redis.call('HGET', KEYS[1], 'c|' .. m)
if not packed then return {{}, {}, {}, {}} end
local ns = string.sub(m, 1, string.find(m, '\0', 1, true))  -- "<ns>\0"
local seen = {[m] = true}
local steps = {}  -- each checkpoint's writes from the target's parent up: {field, value...}
local numbers, values = {}, {}
local parent = part(packed, 5)
while left > 0 and parent and parent ~= '' do
  m = ns .. parent
  if seen[m] then return corrupt(m) end
  seen[m] = true
  packed = redis.call('HGET', KEYS[1], 'c|' .. m)
  if not packed then break end  -- capped or pruned away: the chain ends here
  local fields = rs_writes_of(m)
  local stored = rs_hmget(KEYS[5], fields)
  local step = {}
  for i, field in ipairs(fields) do
    local channel = part(stored[i], 1)
    if channel and walked[channel] then
      step[#step + 1] = field
      step[#step + 1] = stored[i]
    end
  end
  steps[#steps + 1] = step
  -- Blob fields are "<ns>\0<channel>\0<version>": one for each channel it has a version of.
  local refs, channels = {}, {}
  for _, ref in ipairs(rs_split(redis.call('HGET', KEYS[1], 'r|' .. m) or '', '\1')) do
    local stop = string.find(ref, '\0', #ns + 1, true)
    local channel = stop and string.sub(ref, #ns + 1, stop - 1)
    if channel and walked[channel] then
      refs[#refs + 1] = ref
      channels[#channels + 1] = channel
    end
  end
  if #refs > 0 then
    local got = rs_hmget(KEYS[3], refs)
    for i, channel in ipairs(channels) do
      local kind = part(got[i], 1)
      if kind and kind ~= 'empty' then
        numbers[#numbers + 1] = walked[channel]
        values[#values + 1] = got[i]
        walked[channel] = nil
        left = left - 1
      end
    end
  end
  parent = part(packed, 5)
end
if not parent then return corrupt(m) end

local wfields, wvalues = {}, {}
for s = #steps, 1, -1 do
  local step = steps[s]
  for i = 1, #step, 2 do
    wfields[#wfields + 1] = step[i]
    wvalues[#wvalues + 1] = step[i + 1]
  end
end
rs_expire(ttl_ms)
return {wfields, wvalues, numbers, values}
