--[[ adk_state: apply the app: or user: part of an ADK state delta (redistate.adk) as a
merge: each key set on its own, so concurrent writers of other keys lose nothing.
KEYS[1]  the state: a hash, key (its prefix taken off) -> value encoded by the codec
KEYS[2]  its recent writes (rs_memory)
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered, resend, ack
memory   KEYS[2] ARGV[1]
ARGV[2]  the write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[3…] pairs: a key, its encoded value (at least one)
resent   2
returns  {1}: applied; {2}: a resend of a merge already applied (not applied again: a
         later writer's value for the same key stays)
errors   RSARG on malformed arguments, before any write.
unchecked hset zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[1])
if not memory_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32
    or #ARGV < 4 or (#ARGV - 2) % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to adk_state')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  rs_resent(KEYS[2], ARGV[2], 0, memory_ms)
  return {2}
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[2], ack)
  rs_remember(KEYS[2], ARGV[2], now_us, now_us, memory_ms)
end
return {1}
