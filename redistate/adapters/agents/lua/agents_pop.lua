--[[ agents_pop: remove and return the newest item of an OpenAI Agents SDK session
(redistate.agents); a resend returns what the first send removed, removing nothing.
KEYS[1]  the session's items, a list, oldest first
KEYS[2]  its recent writes (see agents_add): the pop's id, and next to it, with the same
         score, "<id>\n<the item removed>" (used only when ARGV[1] is not "0")
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered) and whether this is a resend; an ack is ignored (a pop
         keeps what it removed beside its id)
memory   KEYS[2] ARGV[1]
ARGV[2]  the pop's write id ([A-Za-z0-9_-], 1-32 chars)
flags    allow-oom
resent   2
returns  {1, item}: removed `item`, as stored; {0}: the list was empty;
         {2, item} / {2}: a resend of a pop already made, with what it removed
errors   RSARG on malformed arguments; WRONGTYPE if the key holds something else than a
         list. Both before any write.
unchecked rpop zscore
]]
local memory_ms, resend = rs_memory(ARGV[1])
if not memory_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32 then
  return redis.error_reply('RSARG malformed arguments to agents_pop')
end
local saved = ARGV[2] .. '\n'
if memory_ms > 0 and resend then
  local score = redis.call('ZSCORE', KEYS[2], ARGV[2])
  if score then
    rs_resent(KEYS[2], ARGV[2], tonumber(score), memory_ms)
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], score, score)) do
      if string.sub(member, 1, #saved) == saved then
        return {2, string.sub(member, #saved + 1)}
      end
    end
    return {2}
  end
end
local item = redis.call('RPOP', KEYS[1])
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_remember(KEYS[2], ARGV[2], now_us, now_us, memory_ms)
  -- The removed item is kept for as long as the id, for a resend to return.
  if item then redis.call('ZADD', KEYS[2], rs_int(now_us), saved .. item) end
end
if not item then return {0} end
return {1, item}
