--[[ read_lists: LRANGE of several lists of one entity, read in one step.
Used only when the server refuses MULTI/EXEC: over maxmemory, Redis rejects every
command queued in a transaction, reads included, while a script that only reads runs.
KEYS     the lists
ARGV     for each key, its start and stop index: ARGV[2i-1], ARGV[2i]
returns  one LRANGE reply per key, in order
errors   RSARG on malformed arguments.
unchecked lrange
]]
if #ARGV ~= 2 * #KEYS then
  return redis.error_reply('RSARG malformed arguments to read_lists')
end
local out = {}
for i, key in ipairs(KEYS) do
  local start, stop = ARGV[2 * i - 1], ARGV[2 * i]
  if not string.match(start, '^-?%d+$') or not string.match(stop, '^-?%d+$') then
    return redis.error_reply('RSARG malformed arguments to read_lists')
  end
  out[i] = redis.call('LRANGE', key, start, stop)
end
return out
