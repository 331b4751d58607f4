--[[ claude_drop: delete one subagent transcript of a Claude Agent SDK session
(redistate.claude): its entries, its uuids' marks and its subpath, in one step.
KEYS[1]  the session's transcripts: a zset (claude_append.lua)
KEYS[2]  its subpaths: a set
ARGV[1]  the subpath (no byte below 0x20)
returns  the number of members removed
errors   RSARG on malformed arguments, before any write.
unchecked zremrangebylex
]]
if #ARGV ~= 1 or ARGV[1] == '' or string.find(ARGV[1], '[%z\1-\31]') then
  return redis.error_reply('RSARG malformed arguments to claude_drop')
end
-- "<subpath>\0…" (entries) and "<subpath>\1…" (marks): every member below "<subpath>\2".
local removed = redis.call('ZREMRANGEBYLEX', KEYS[1], '[' .. ARGV[1] .. '\0', '(' .. ARGV[1] .. '\2')
redis.call('SREM', KEYS[2], ARGV[1])
return removed
