--[[ agents_add: append a batch of items to an OpenAI Agents SDK session (redistate.agents)
in one step: no other batch lands inside it, and the TTL is set with the write.
KEYS[1]  the session's items, a list, oldest first
KEYS[2]  its recent writes: ids of adds, pops and clears made in the last ARGV[3] ms,
         scored by time in µs (used only when ARGV[3] is not "0")
ARGV[1]  ttl in ms from now, set on the list with every add; "0" = leave its expiry as is
ARGV[2]  the most items the list keeps (the newest); "0" = no cap
ARGV[3]  the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered), whether this is a resend, and an ack
memory   KEYS[2] ARGV[3]
ARGV[4]  the add's write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[5…] the items, each encoded by the store's codec, oldest first (at least one)
resent   2
returns  {1, length}: appended; {2, length}: a resend of an add already made, nothing
         appended. `length`: the list's length afterwards
errors   RSARG on malformed arguments; WRONGTYPE if the key holds something else than a
         list. Both before any write.
unchecked zscore
]]
local ttl_ms = rs_ttl(ARGV[1])
local memory_ms, resend, ack = rs_memory(ARGV[3])
if not ttl_ms or not memory_ms or not string.match(ARGV[2], '^%d+$') or #ARGV[2] > 15
    or not string.match(ARGV[4], '^[%w_-]+$') or #ARGV[4] > 32 or #ARGV < 5 then
  return redis.error_reply('RSARG malformed arguments to agents_add')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[2], ARGV[4]) then
  rs_resent(KEYS[2], ARGV[4], 0, memory_ms)
  return {2, redis.call('LLEN', KEYS[1])}
end
-- In slices: unpack() of thousands of values would overflow Lua's C stack. A WRONGTYPE
-- fails the first slice, so nothing is written then.
local length
for first = 5, #ARGV, 1000 do
  length = redis.call('RPUSH', KEYS[1], unpack(ARGV, first, math.min(first + 999, #ARGV)))
end
local cap = tonumber(ARGV[2])
if cap > 0 and length > cap then
  redis.call('LTRIM', KEYS[1], rs_int(-cap), -1)
  length = cap
end
if ttl_ms > 0 then redis.call('PEXPIRE', KEYS[1], ttl_ms) end
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[2], ack)
  rs_remember(KEYS[2], ARGV[4], now_us, now_us, memory_ms)
end
return {1, length}
