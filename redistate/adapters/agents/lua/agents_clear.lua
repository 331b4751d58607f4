--[[ agents_clear: delete every item of an OpenAI Agents SDK session (redistate.agents);
a resend deletes nothing, so items added after the first send are kept.
KEYS[1]  the session's items, a list
KEYS[2]  its recent writes (see agents_add; used only when ARGV[1] is not "0")
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered), whether this is a resend, and an ack
memory   KEYS[2] ARGV[1]
ARGV[2]  the clear's write id ([A-Za-z0-9_-], 1-32 chars)
flags    allow-oom
resent   2
returns  1: deleted the list; 0: there was none; 2: a resend of a clear already made,
         nothing deleted
errors   RSARG on malformed arguments, before any write.
unchecked del zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[1])
if not memory_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32 then
  return redis.error_reply('RSARG malformed arguments to agents_clear')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  rs_resent(KEYS[2], ARGV[2], 0, memory_ms)
  return 2
end
local deleted = redis.call('DEL', KEYS[1])
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[2], ack)
  rs_remember(KEYS[2], ARGV[2], now_us, now_us, memory_ms)
end
return deleted
