--[[ checkpoint_find: one checkpoint of a task, by id, with its id entry.
KEYS[1]  checkpoint list
KEYS[2]  id list, aligned with KEYS[1]
ARGV[1]  the checkpoint id
returns  {{entry}, {blob}} if the history holds it, else {{}, {}}
]]
local entries = redis.call('LRANGE', KEYS[2], 0, -1)
for i, entry in ipairs(entries) do
  if string.match(entry, '^%d+,%d+,%d+,([%w_-]+),') == ARGV[1] then
    return {{entry}, {redis.call('LINDEX', KEYS[1], i - 1)}}
  end
end
return {{}, {}}
