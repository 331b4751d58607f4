--[[ memory_sweep: one namespace of the LangGraph store swept: expired items deleted (at
most 1,000 a call) and, if it has no item left, a tomb left for its registry entry.
KEYS[1..2] the namespace's items and exp, see _memory.lua
KEYS[3]  tomb (see memory_put.lua)
ARGV[1]  the registry generation the sweep read for the namespace ("0": none, the
         namespace is not in the registry: no tomb is left)
ARGV[2]  "set": sweep; "clear": only delete the tomb if it still holds ARGV[1] (after
         memory_forget)
returns  {expired items deleted, 1 if the namespace is empty else 0, 1 if more expired
         items remain else 0}
errors   RSARG on malformed arguments.
flags    allow-oom
unchecked get time zrangebyscore
]]
if not string.match(ARGV[1], '^%d+$') or #ARGV[1] > 15
    or (ARGV[2] ~= 'set' and ARGV[2] ~= 'clear') then
  return redis.error_reply('RSARG malformed arguments to memory_sweep')
end
if ARGV[2] == 'clear' then
  if redis.call('GET', KEYS[3]) == ARGV[1] then
    redis.call('DEL', KEYS[3])
  end
  return {0, 0, 0}
end
local now = rs_mem_now()
local gone = rs_mem_purge(now, 1000)
local more = 0
if gone == 1000 then more = 1 end
if gone > 0 then rs_mem_expiry() end
if redis.call('EXISTS', KEYS[1]) == 1 then return {gone, 0, more} end
if ARGV[1] ~= '0' then redis.call('SET', KEYS[3], ARGV[1]) end
return {gone, 1, 0}
