--[[ checkpoint_recode: replace elements of a task's checkpoint list or delta log with the
same checkpoints or deltas encoded anew (rotate-keys re-encrypts with it).
KEYS[1]  the list: a task's checkpoints (key task) or its delta log (task ... :log)
ARGV     pairs: a prefix naming one element ("K1,<digest or seal>" of a checkpoint, "D1,<id>,"
         of a delta), then the element to put in its place
returns  how many elements were replaced; an element saved, trimmed or deleted since it
         was read is simply not found (saves push at the head, so positions move: they
         are looked up here, in one step)
errors   RSARG on an odd number of arguments or an empty prefix. Before any write.
unchecked lrange
]]
if #ARGV % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to checkpoint_recode')
end
for i = 1, #ARGV, 2 do
  if #ARGV[i] < 4 then return redis.error_reply('RSARG malformed arguments to checkpoint_recode') end
end
local replaced = 0
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for index, item in ipairs(items) do
  for i = 1, #ARGV, 2 do
    local prefix = ARGV[i]
    if string.sub(item, 1, #prefix) == prefix then
      redis.call('LSET', KEYS[1], index - 1, ARGV[i + 1])
      replaced = replaced + 1
      break
    end
  end
end
return replaced
