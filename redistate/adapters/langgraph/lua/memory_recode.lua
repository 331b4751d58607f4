--[[ memory_recode: replace items of one namespace of the LangGraph store with the same
items whose values are encoded anew (rotate-keys re-encrypts with it), each only if it
is still exactly the item that was read.
KEYS[1]  the namespace's items, a hash: item key -> "<created>:<updated>:<ttl>:<value>"
ARGV     triples: item key, the item as it was read, the item to put in its place
returns  how many items were replaced: one written, deleted or expired since it was
         read is left (its new value was written under the primary key, or a second
         run finds it). Times and expiries stay as they are.
errors   RSARG on malformed arguments; WRONGTYPE if the key holds something else
         than a hash. Both before any write.
]]
if #ARGV == 0 or #ARGV % 3 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to memory_recode')
end
local replaced = 0
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    replaced = replaced + 1
  end
end
return replaced
