--[[ adk_create: create one Google ADK session (redistate.adk), its state and times in
one step, the TTL set with the write.
KEYS[1]  the session: a hash, "m:last" -> its last update time (seconds), "s:<key>" ->
         a session-state value encoded by the store's codec
KEYS[2]  its events: a list, oldest first (adk_append.lua)
KEYS[3]  its recent writes (rs_memory)
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered, resend, ack
memory   KEYS[3] ARGV[1]
ARGV[2]  the write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[3]  ttl in ms from now; "0" = no expiry
ARGV[4]  the creation time (seconds, as ADK keeps it)
ARGV[5…] pairs: a "s:<key>" field, its encoded value
resent   2
returns  {1}: created; {0}: a session with this id exists (nothing written); {2}: a
         resend of a create already made
errors   RSARG on malformed arguments, before any write.
unchecked exists hset zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[1])
local ttl_ms = rs_ttl(ARGV[3])
if not memory_ms or not ttl_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32
    or not tonumber(ARGV[4]) or #ARGV < 4 or (#ARGV - 4) % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to adk_create')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  rs_resent(KEYS[3], ARGV[2], 0, memory_ms)
  return {2}
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {0} end
redis.call('HSET', KEYS[1], 'm:last', ARGV[4], unpack(ARGV, 5))
if ttl_ms > 0 then redis.call('PEXPIRE', KEYS[1], ttl_ms) end
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[3], ack)
  rs_remember(KEYS[3], ARGV[2], now_us, now_us, memory_ms)
end
return {1}
