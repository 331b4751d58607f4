--[[ claude_recode: replace entries of a Claude Agent SDK session's transcripts
(redistate.claude) with the same entries encoded anew (rotate-keys re-encrypts with it),
each only if it is still there as it was read.
KEYS[1]  the session's transcripts: a zset, every member at score 0 (claude_append.lua)
ARGV     pairs: a member as read, the member to put in its place (the same
         "<subpath>\0<seq>" head, the entry encoded anew)
returns  how many were replaced: one deleted or expired since it was read is left
errors   RSARG on a malformed argument count, before any write; WRONGTYPE if the key
         holds something else than a zset (at the first ZSCORE, before any write).
]]
if #ARGV % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to claude_recode')
end
local replaced = 0
for i = 1, #ARGV, 2 do
  if ARGV[i] ~= ARGV[i + 1] and redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    -- Added first: removing a zset's last member deletes the key, and its TTL with it.
    redis.call('ZADD', KEYS[1], 0, ARGV[i + 1])
    redis.call('ZREM', KEYS[1], ARGV[i])
    replaced = replaced + 1
  end
end
return replaced
