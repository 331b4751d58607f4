--[[ checkpoint_migrate: replace checkpoints of a task with the same checkpoints, their
states migrated to a newer schema (redistate migrate writes them back with it), except
one that deltas made against an older schema still follow: a patch cannot be migrated,
so that checkpoint stays until the next save compacts them.
KEYS[1]  the task's checkpoint list
KEYS[2]  its delta log
ARGV[1]  the schema the new checkpoints are at (digits)
ARGV     then triples: a prefix naming one checkpoint ("K1,<digest or seal>"), its id, the
         checkpoint to put in its place
returns  {replaced, held}: held = left because older deltas follow them; a checkpoint
         saved over, trimmed or deleted since it was read is simply not found
errors   RSARG on malformed arguments. Before any write.
unchecked lrange
]]
local target = tonumber(ARGV[1])
if not string.match(ARGV[1], '^%d+$') or (#ARGV - 1) % 3 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to checkpoint_migrate')
end
for i = 2, #ARGV, 3 do
  if #ARGV[i] < 4 or not string.match(ARGV[i + 1], '^[%w_-]+$') then
    return redis.error_reply('RSARG malformed arguments to checkpoint_migrate')
  end
end
-- Checkpoints an older delta follows: "D1,<id>,<snapshot>,<ms>\n<digest>[,<schema>]\n",
-- the digest hex or a seal "<key id>:<hex>".
local held_ids = {}
for _, delta in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local snapshot, schema =
    string.match(delta, '^D1,[%w_-]+,([%w_-]*),%d+\n[%w_:-]+,?(%d*)\n')
  if snapshot and (tonumber(schema) or 1) < target then held_ids[snapshot] = true end
end
local replaced, held = 0, 0
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for i = 2, #ARGV, 3 do
  if held_ids[ARGV[i + 1]] then
    held = held + 1
  else
    local prefix = ARGV[i]
    for index, item in ipairs(items) do
      if string.sub(item, 1, #prefix) == prefix then
        redis.call('LSET', KEYS[1], index - 1, ARGV[i + 2])
        replaced = replaced + 1
        break
      end
    end
  end
end
return {replaced, held}
