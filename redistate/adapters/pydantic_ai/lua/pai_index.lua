--[[ pai_index: enter a Pydantic AI conversation in an index of conversations (one
scope's, or every one's) with its save time, in the round trip of the save
(redistate.pydantic_ai), keeping the index alive as long as what it lists.
KEYS[1]  the index: a zset, conversation id -> last saved (ms); prune_index takes
         out only entries over a minute old whose conversation is gone
ARGV[1]  the conversation id
ARGV[2]  its save time (ms)
ARGV[3]  the conversations' ttl in ms ("0": they do not expire): the index lives at
         least that and a minute from now
returns  1
errors   RSARG on malformed arguments, before any write.
unchecked pttl zadd
]]
local ttl_ms = rs_ttl(ARGV[3])
if #ARGV ~= 3 or ARGV[1] == '' or not ttl_ms or not tonumber(ARGV[2]) then
  return redis.error_reply('RSARG malformed arguments to pai_index')
end
local left = redis.call('PTTL', KEYS[1])
redis.call('ZADD', KEYS[1], rs_int(tonumber(ARGV[2])), ARGV[1])
if ttl_ms == 0 then
  redis.call('PERSIST', KEYS[1])
elseif left ~= -1 and left < ttl_ms + 60000 then
  redis.call('PEXPIRE', KEYS[1], rs_int(ttl_ms + 60000))
end
return 1
