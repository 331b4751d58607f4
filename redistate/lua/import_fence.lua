--[[ import_fence: raise a lease name's fencing counter to an exported value; never lower it.
KEYS[1]  fencing counter (a persistent INCR counter)
ARGV[1]  the exported counter value (digits, at most 2^53 - 1)
returns  {1, value}: the counter was below (or absent) and is now ARGV[1];
         {0, current}: the counter is already at or above ARGV[1]: unchanged
errors   RSARG on a malformed argument; RSINTEGRITY if the key holds something that is
         not a counter. Before any write.
Fencing relies on the counter only growing (a new holder's fence beats every earlier
one), so an import sets max(stored, exported), with or without --force.
]]
local value = ARGV[1]
if not string.match(value, '^%d+$') or #value > 16 or tonumber(value) > 9007199254740991 then
  return redis.error_reply('RSARG malformed arguments to import_fence')
end
local current = redis.call('GET', KEYS[1])
if current and (not string.match(current, '^%d+$') or #current > 16) then
  return redis.error_reply('RSINTEGRITY value at ' .. KEYS[1] .. ' is not a fencing counter')
end
local stored = current and tonumber(current) or 0
if stored >= tonumber(value) then return {0, stored} end
redis.call('SET', KEYS[1], value)
return {1, tonumber(value)}
