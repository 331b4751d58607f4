--[[ checkpoint_read: read a task's history (and delta log) in one consistent step.
KEYS[1]  checkpoint list
KEYS[2]  id list, aligned with KEYS[1]
KEYS[3]  delta log
ARGV[1]  how many checkpoints, newest first ("0" = all)
ARGV[2]  "1" = also return the delta log, "0" = not
ARGV[3]  a checkpoint id to return alone, or "" for the newest ARGV[1]
returns  {entries, blobs, deltas}: aligned lists (entries from KEYS[2], blobs from
         KEYS[1]); deltas oldest first, or empty
errors   RSARG on malformed arguments.
]]
if not string.match(ARGV[1], '^%d+$') or (ARGV[2] ~= '0' and ARGV[2] ~= '1') then
  return redis.error_reply('RSARG malformed arguments to checkpoint_read')
end
local deltas = {}
if ARGV[2] == '1' then deltas = redis.call('LRANGE', KEYS[3], 0, -1) end
if ARGV[3] ~= '' then
  local entries = redis.call('LRANGE', KEYS[2], 0, -1)
  for i, entry in ipairs(entries) do
    if string.match(entry, '^%d+,%d+,%d+,([%w_-]+),') == ARGV[3] then
      return {{entry}, {redis.call('LINDEX', KEYS[1], i - 1)}, deltas}
    end
  end
  return {{}, {}, deltas}
end
local last = tonumber(ARGV[1]) - 1
return {redis.call('LRANGE', KEYS[2], 0, last), redis.call('LRANGE', KEYS[1], 0, last), deltas}
