--[[ graph_remove: remove checkpoints of one thread with their writes and the blobs no
remaining checkpoint uses (prune, delete_for_runs).
KEYS[1..7] the thread's keys, see _graph.lua
ARGV[1]  "latest": keep only the newest checkpoint of each namespace;
         "run": remove every checkpoint whose run id is ARGV[2]
returns  how many checkpoints were removed
errors   RSARG on malformed arguments.
]]
local removed = 0
if ARGV[1] == 'latest' then
  local members = redis.call('ZRANGEBYLEX', KEYS[2], '-', '+')
  for i, m in ipairs(members) do
    local ns = string.sub(m, 1, string.find(m, '\0', 1, true))
    local nxt = members[i + 1]
    if nxt and string.sub(nxt, 1, #ns) == ns then removed = removed + rs_remove(m) end
  end
  return removed
end
if ARGV[1] ~= 'run' or not ARGV[2] or ARGV[2] == '' then
  return redis.error_reply('RSARG malformed arguments to graph_remove')
end
local prefix = ARGV[2] .. '\0'
for _, entry in ipairs(redis.call('ZRANGEBYLEX', KEYS[7], '[' .. prefix, '[' .. prefix .. '\255')) do
  removed = removed + rs_remove(string.sub(entry, #prefix + 1))
end
return removed
