--[[ import_task: restore one exported task (checkpoints, ids, delta log) unless the
stored task is newer.
KEYS[1]  checkpoint list
KEYS[2]  id list: "<seq:16>,<created_ms:13>,<fence>,<id>,<parent_id>", aligned with KEYS[1]
KEYS[3]  delta log
KEYS[4]  the task's step records (run.step): not in the export, so an imported task
         starts without them (they belong to the history being replaced)
ARGV[1]  ttl in ms for every key of the task; "0" = no expiry
ARGV[2]  "1" = overwrite even a newer stored task (--force), "0" = refuse it
ARGV[3]  number of checkpoint blobs, b (0-1000000)
ARGV[4]  number of id entries, e (0-1000000)
ARGV[5 .. 4+b]            the checkpoint blobs, newest first, stored as is
ARGV[5+b .. 4+b+e]        the id entries, newest first, stored as is
ARGV[5+b+e ..]            the deltas, oldest first, stored as is
returns  {1, seq}: written, seq is the imported newest checkpoint's (0 if none);
         {0, seq}: refused, the stored task is newer (nothing changed)
errors   RSARG on malformed arguments, before any write.
Newer: compared by (the latest server time of a checkpoint or delta, newest seq, delta
count). Time first, because seq starts again at 1 after a delete: a task deleted and
started again since the export is newer even with fewer checkpoints. Unreadable entries
are skipped, as checkpoint_save does. The three keys are replaced whole, and get the
same expiry.
]]
local ttl_ms = rs_ttl(ARGV[1])
local blobs, entries = tonumber(ARGV[3]), tonumber(ARGV[4])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1')
    or not string.match(ARGV[3], '^%d+$') or not string.match(ARGV[4], '^%d+$')
    or blobs > 1000000 or entries > 1000000 or 4 + blobs + entries > #ARGV then
  return redis.error_reply('RSARG malformed arguments to import_task')
end

-- (latest ms, newest seq) of id entries and deltas.
local function newness(ids, log)
  local ms, seq = 0, 0
  for _, entry in ipairs(ids) do
    local s, t = string.match(entry, '^(%d+),(%d+),%d+,[%w_-]+,[%w_-]*$')
    if s then
      seq, ms = math.max(seq, tonumber(s)), math.max(ms, tonumber(t))
    end
  end
  for _, delta in ipairs(log) do
    local t = string.match(delta, '^D1,[%w_-]+,[%w_-]*,(%d+)\n')
    if t then ms = math.max(ms, tonumber(t)) end
  end
  return ms, seq
end

local imported_ids, imported_log = {}, {}
for i = 1, entries do imported_ids[i] = ARGV[4 + blobs + i] end
local deltas = #ARGV - 4 - blobs - entries
for i = 1, deltas do imported_log[i] = ARGV[4 + blobs + entries + i] end
local ms, seq = newness(imported_ids, imported_log)
if ARGV[2] == '0' then
  local stored_log = redis.call('LRANGE', KEYS[3], 0, -1)
  local stored_ms, stored_seq = newness(redis.call('LRANGE', KEYS[2], 0, -1), stored_log)
  if stored_ms > ms or (stored_ms == ms and (stored_seq > seq
      or (stored_seq == seq and #stored_log > deltas))) then
    return {0, stored_seq}
  end
end

-- RPUSH in slices: Lua's unpack() is limited by its C stack (LUAI_MAXCSTACK, 8000).
local function push(key, first, count)
  local at = first
  while at < first + count do
    local stop = math.min(at + 999, first + count - 1)
    redis.call('RPUSH', key, unpack(ARGV, at, stop))
    at = stop + 1
  end
end

redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
push(KEYS[1], 5, blobs)
push(KEYS[2], 5 + blobs, entries)
push(KEYS[3], 5 + blobs + entries, deltas)
if ttl_ms > 0 then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
return {1, seq}
