--[[ adk_append: append one event to a Google ADK session (redistate.adk) and apply its
session-state delta, in one step: the event and its delta land together or not at
all, and the TTL of both keys is set with the write.
KEYS[1..2] the session and its events, see adk_create.lua
KEYS[3]  its recent writes (rs_memory)
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered, resend, ack
memory   KEYS[3] ARGV[1]
ARGV[2]  the write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[3]  ttl in ms from now; "0" = leave the expiry as it is
ARGV[4]  the event's timestamp (seconds): the session's last update time
ARGV[5]  the event's id as the hash marks it: "e:<event id>"
ARGV[6]  "1": append even if an event with this id is in the session (the caller has
         compared them and found this one different); "0": not then
ARGV[7]  the event as the list holds it: "<timestamp>:<schema>:<encoded event>"
ARGV[8…] pairs: a "s:<key>" field, its encoded value (the delta's session keys)
resent   2
returns  {1, events}: appended, the list's length after; {0}: no such session (it was
         deleted or expired: nothing written); {2}: a resend of an append already made;
         {3}: an event with this id is in the session and ARGV[6] is "0" (nothing
         written: the caller compares the two, as ADK's services do)
errors   RSARG on malformed arguments, before any write.
unchecked exists hexists hset zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[1])
local ttl_ms = rs_ttl(ARGV[3])
if not memory_ms or not ttl_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32
    or not tonumber(ARGV[4]) or string.sub(ARGV[5], 1, 2) ~= 'e:' or #ARGV[5] < 3
    or (ARGV[6] ~= '0' and ARGV[6] ~= '1') or #ARGV < 7 or (#ARGV - 7) % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to adk_append')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  rs_resent(KEYS[3], ARGV[2], 0, memory_ms)
  return {2}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
if ARGV[6] == '0' and redis.call('HEXISTS', KEYS[1], ARGV[5]) == 1 then return {3} end
redis.call('HSET', KEYS[1], 'm:last', ARGV[4], ARGV[5], '1', unpack(ARGV, 8))
local length = redis.call('RPUSH', KEYS[2], ARGV[7])
if ttl_ms > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  redis.call('PEXPIRE', KEYS[2], ttl_ms)
end
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[3], ack)
  rs_remember(KEYS[3], ARGV[2], now_us, now_us, memory_ms)
end
return {1, length}
