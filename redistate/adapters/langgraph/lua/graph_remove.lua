--[[ graph_remove: remove checkpoints of one thread with their writes and the blobs no
remaining checkpoint uses (prune, delete_for_runs).
KEYS[1..7] the thread's keys, see _graph.lua
ARGV[1]  "latest": keep only the newest checkpoint of each namespace (refused for a
         thread that uses a DeltaChannel: its values are rebuilt from older ones);
         "runs": remove every checkpoint whose run id is one of ARGV[2..]
flags    allow-oom
returns  how many checkpoints were removed; -1: "latest" refused, nothing removed
errors   RSARG on malformed arguments. Before any write.
]]
local removed = 0
if ARGV[1] == 'latest' then
  if redis.call('HGET', KEYS[1], 'delta') == '1' then return -1 end
  local members = redis.call('ZRANGEBYLEX', KEYS[2], '-', '+')
  for i, m in ipairs(members) do
    local ns = string.sub(m, 1, string.find(m, '\0', 1, true))
    local nxt = members[i + 1]
    if nxt and string.sub(nxt, 1, #ns) == ns then removed = removed + rs_remove(m) end
  end
  return removed
end
if ARGV[1] ~= 'runs' or #ARGV < 2 then
  return redis.error_reply('RSARG malformed arguments to graph_remove')
end
for i = 2, #ARGV do
  if ARGV[i] == '' then return redis.error_reply('RSARG malformed arguments to graph_remove') end
end
for i = 2, #ARGV do
  local prefix = ARGV[i] .. '\0'
  for _, entry in ipairs(redis.call('ZRANGEBYLEX', KEYS[7], '[' .. prefix, '[' .. prefix .. '\255')) do
    removed = removed + rs_remove(string.sub(entry, #prefix + 1))
  end
end
return removed
