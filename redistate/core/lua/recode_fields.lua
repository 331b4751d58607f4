--[[ recode_fields: replace fields of a hash with the same values encoded anew (rotate-keys
re-encrypts with it), each only if it still holds exactly what was read: a task's step
records (redistate.steps), a LangGraph store namespace's items, an ADK session's, user's
or app's state.
KEYS[1]  the hash
ARGV     triples: a field, its value as read, the value to put in its place
returns  how many fields were replaced: one written, deleted or expired since it was read
         is left (its new value was written under the primary key, or a second run finds
         it)
errors   RSARG on a malformed argument count; WRONGTYPE if the key holds something else
         than a hash. Both before any write.
]]
if #ARGV % 3 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to recode_fields')
end
local replaced = 0
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    replaced = replaced + 1
  end
end
return replaced
