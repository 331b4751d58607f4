--[[ recode_items: replace elements of a list with the same items encoded anew (rotate-keys
re-encrypts with it), each only if it is still exactly the element that was read: an
OpenAI Agents SDK session's items (redistate.agents), an ADK session's events.
KEYS[1]  the list, oldest first (never its recent writes)
ARGV     pairs: an item as it was read, then the item to put in its place
returns  how many items were replaced. Items are found by their bytes, not positions
         (a capped add trims the head): one popped, trimmed or cleared since it was read
         is simply not found; equal bytes hold the same item, so each pair replaces the
         first element still holding its old bytes, at most once.
errors   RSARG on an odd number of arguments; WRONGTYPE if the key holds something else
         than a list. Both before any write.
unchecked lrange
]]
if #ARGV % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to recode_items')
end
-- old bytes -> the replacements still to place, in the order given
local wanted = {}
for i = 1, #ARGV, 2 do
  local queue = wanted[ARGV[i]]
  if not queue then
    queue = {}
    wanted[ARGV[i]] = queue
  end
  queue[#queue + 1] = ARGV[i + 1]
end
local replaced = 0
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for index, item in ipairs(items) do
  local queue = wanted[item]
  if queue and #queue > 0 then
    redis.call('LSET', KEYS[1], index - 1, table.remove(queue, 1))
    replaced = replaced + 1
  end
end
return replaced
