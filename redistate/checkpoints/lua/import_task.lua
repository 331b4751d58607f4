--[[ import_task: restore one exported task (checkpoints, ids, delta log) unless the
stored task is newer, and merge its step records in either case.
KEYS[1]  checkpoint list
KEYS[2]  id list: "<seq:16>,<created_ms:13>,<fence>,<id>,<parent_id>", aligned with KEYS[1]
KEYS[3]  delta log
KEYS[4]  the task's step records (run.step), a hash by step name: merged, never deleted
KEYS[5]  the task's checkpoint id index (_checkpoint_index): rebuilt from the imported
         ids whenever the lists are replaced (an export holds no index)
ARGV[1]  ttl in ms for every key of the task; "0" = no expiry
ARGV[2]  "1" = overwrite even a newer stored task and stored step records (--force),
         "0" = refuse the one, keep the others
ARGV[3]  number of checkpoint blobs, b (0-1000000)
ARGV[4]  number of id entries, e (0-1000000)
ARGV[5]  number of step records, s (0-1000000)
ARGV[6 .. 5+b]                the checkpoint blobs, newest first, stored as is
ARGV[6+b .. 5+b+e]            the id entries, newest first, stored as is
ARGV[6+b+e .. 5+b+e+2s]       pairs: step name, step record ("S1,...", stored as is)
ARGV[6+b+e+2s ..]             the deltas, oldest first, stored as is
returns  {1, seq, steps}: written (or already there: as new, the lists left as they are),
         seq is the imported newest checkpoint's (0 if none);
         {0, seq, steps}: the lists refused, the stored task is newer (unchanged);
         steps: how many step records were written
errors   RSARG on malformed arguments, before any write.
Newer: compared by (the latest server time of a checkpoint or delta, newest seq, delta
count). Time first, because seq starts again at 1 after a delete: a task deleted and
started again since the export is newer even with fewer checkpoints. Unreadable entries
are skipped, as checkpoint_save does. The three lists are replaced whole, and get the
same expiry; lists exactly as new as the file's are the same task, left as they are
(a file older than a rotate-keys never puts old-key ciphertext back). A step record is written where the store has none of that name (with
--force over one), even when the lists are refused: a recorded step is never lost, so
a resumed task never calls a recorded step again. The step records take the task's
expiry (its lists', as step_record gives them; ARGV[1] for a task of steps only).
]]
local ttl_ms = rs_ttl(ARGV[1])
local blobs, entries, steps = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1')
    or not string.match(ARGV[3], '^%d+$') or not string.match(ARGV[4], '^%d+$')
    or not string.match(ARGV[5], '^%d+$') or blobs > 1000000 or entries > 1000000
    or steps > 1000000 or 5 + blobs + entries + 2 * steps > #ARGV then
  return redis.error_reply('RSARG malformed arguments to import_task')
end
local first_step = 6 + blobs + entries
for i = first_step, first_step + 2 * steps - 1, 2 do
  if ARGV[i] == '' or string.sub(ARGV[i + 1], 1, 3) ~= 'S1,' then
    return redis.error_reply('RSARG malformed step record in import_task')
  end
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

-- Step records first: whatever the lists' fate.
local written = 0
for i = first_step, first_step + 2 * steps - 1, 2 do
  if ARGV[2] == '1' then
    if redis.call('HGET', KEYS[4], ARGV[i]) ~= ARGV[i + 1] then
      redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
      written = written + 1
    end
  else
    written = written + redis.call('HSETNX', KEYS[4], ARGV[i], ARGV[i + 1])
  end
end

-- The step records' expiry: the task's, as step_record sets it.
local function expire_steps()
  if redis.call('EXISTS', KEYS[4]) == 0 then return end
  local current = -2
  for _, i in ipairs({1, 3, 2}) do
    if current == -2 then current = redis.call('PTTL', KEYS[i]) end
  end
  if current == -2 then current = ttl_ms > 0 and ttl_ms or -1 end
  if current > 0 then
    redis.call('PEXPIRE', KEYS[4], current)
  else
    redis.call('PERSIST', KEYS[4])
  end
end

local imported_ids, imported_log = {}, {}
for i = 1, entries do imported_ids[i] = ARGV[5 + blobs + i] end
local first_delta = first_step + 2 * steps
local deltas = #ARGV - first_delta + 1
for i = 1, deltas do imported_log[i] = ARGV[first_delta + i - 1] end
local ms, seq = newness(imported_ids, imported_log)
if ARGV[2] == '0' then
  local stored_log = redis.call('LRANGE', KEYS[3], 0, -1)
  local stored_ms, stored_seq = newness(redis.call('LRANGE', KEYS[2], 0, -1), stored_log)
  if stored_ms > ms or (stored_ms == ms and (stored_seq > seq
      or (stored_seq == seq and #stored_log > deltas))) then
    expire_steps()
    return {0, stored_seq, written}
  end
  if stored_ms == ms and stored_seq == seq and #stored_log == deltas
      and redis.call('LLEN', KEYS[2]) == entries then
    expire_steps()
    return {1, seq, written}
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

redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
push(KEYS[1], 6, blobs)
push(KEYS[2], 6 + blobs, entries)
push(KEYS[3], first_delta, deltas)
if ttl_ms > 0 then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
rs_ck_rebuild(KEYS[2], KEYS[5], imported_ids)
expire_steps()
return {1, seq, written}
