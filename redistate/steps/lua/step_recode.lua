--[[ step_recode: replace step records of a task with the same records encoded anew
(rotate-keys re-encrypts with it), each only if it is still the one that was read.
KEYS[1]  the task's step records, a hash by step name
ARGV     triples: the step's name, the record read, the record to put in its place
returns  how many were replaced (one changed since it was read is left for a second run)
errors   RSARG on a malformed argument count. Before any write.
]]
if #ARGV % 3 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to step_recode')
end
local replaced = 0
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    replaced = replaced + 1
  end
end
return replaced
