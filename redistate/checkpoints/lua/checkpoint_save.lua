--[[ checkpoint_save: push a checkpoint onto a task's capped history, in one step.
KEYS[1]  checkpoint list (newest first; each element is a blob made by the client)
KEYS[2]  id list, aligned with KEYS[1]: "<seq:16>,<created_ms:13>,<fence>,<id>,<parent_id>"
KEYS[3]  delta log (compacted away: a new snapshot starts here)
KEYS[4]  lock key of the task id (read only when ARGV[6] is set)
KEYS[5]  the task's recent writes (see checkpoint_log; used only when ARGV[7] is not "0")
KEYS[6]  the task's step records (run.step): given the same expiry as the history
KEYS[7]  the id -> position index of KEYS[2] (_checkpoint_index): looked in for a
         caller-chosen id or a resend, kept up to date by every save, same expiry
ARGV[1]  checkpoint id ([A-Za-z0-9_-], 1-64 chars)
ARGV[2]  the checkpoint blob (stored as is)
ARGV[3]  keep: how many checkpoints the history holds (1-100000)
ARGV[4]  ttl in ms for every key of the task; "0" = no expiry
ARGV[5]  fence of the lease the write is made under; "0" = none
ARGV[6]  lease value the write is guarded by, or "" (unguarded)
ARGV[7]  the write memory (rs_memory): how long (ms) a checkpoint id is remembered ("0"
         = not at all), whether this is a resend, and an ack
memory   KEYS[5] ARGV[7]
ARGV[8]  "1": the caller chose the id (look for it in the whole history); "0": the
         client generated it (unique: only a resend, remembered in KEYS[5], can repeat it)
resent   0 2
returns  {1, entry}: saved, entry is its id-list element;
         {0, entry, blob}: this id is already in the history (a resent save): nothing
         changed, the stored checkpoint is returned;
         {2}: this id was saved within the memory and is no longer in the history
         (deleted, or trimmed past): nothing changed
errors   RSARG on malformed arguments; RSLOCKLOST if the lease no longer holds the lock
         (checked after the resend lookup). Both before any write.
seq is the newest readable entry's seq + 1: strictly increasing per task, under any
number of concurrent savers (scripts run one at a time). A torn task (the two lists of
unequal length: one was evicted) is repaired first: both are trimmed to the pairs
pushed together since; seq still follows the surviving ids (1 if none survived). Entries are pushed in seq
order, so the newest readable one is the first from the head: a save costs O(1) in the
history's length. A caller-chosen id or a resend is looked up in the index (O(1)); only
an index that does not match the list (written before it existed, imported by older
code, torn) costs one scan, which rebuilds it.
unchecked zscore
]]
local id, keep, ttl_ms = ARGV[1], tonumber(ARGV[3]), rs_ttl(ARGV[4])
local memory_ms, resend, ack = rs_memory(ARGV[7])
if not string.match(id, '^[%w_-]+$') or #id > 64 or not string.match(ARGV[3], '^%d+$')
    or keep < 1 or keep > 100000 or not ttl_ms or not string.match(ARGV[5], '^%d+$')
    or not memory_ms then
  return redis.error_reply('RSARG malformed arguments to checkpoint_save')
end
local given = ARGV[8]
if given ~= '0' and given ~= '1' then
  return redis.error_reply('RSARG malformed arguments to checkpoint_save')
end
-- A generated id is new unless this is a resend; a chosen one may be saved again.
local remembered = memory_ms > 0 and (resend or given == '1') and redis.call('ZSCORE', KEYS[5], id)
if given == '1' or remembered then
  local at, entry = rs_ck_find(KEYS[2], KEYS[7], id)
  if at then
    rs_resent(KEYS[5], id, 0, memory_ms)
    return {0, entry, redis.call('LINDEX', KEYS[1], at)}
  end
end
if remembered then
  rs_resent(KEYS[5], id, 0, memory_ms)
  return {2}
end
-- After the resend checks: a save made while the lease held is reported as made.
local lost = rs_guard(KEYS[4], ARGV[6])
if lost then return lost end

-- A damaged entry is skipped (restore skips its checkpoint too), never fatal: the
-- next saves go on and the trim drops it in time.
-- The head entry alone first (it is sound but in a damaged list), then 16 at a time.
local seq, parent, at, size, head = 0, '', 0, 1, nil
repeat
  local batch = redis.call('LRANGE', KEYS[2], rs_int(at), rs_int(at + size - 1))
  if at == 0 then head = batch[1] end  -- the id list's head, for the index's check
  for _, entry in ipairs(batch) do
    local s, eid = string.match(entry, '^(%d+),%d+,%d+,([%w_-]+),[%w_-]*$')
    if s then
      seq, parent = tonumber(s), eid
      break
    end
  end
  at, size = at + size, 16
until seq > 0 or #batch < (at == 1 and 1 or 16)

-- A torn task: one of the two lists was evicted (or lost) and the other kept. Pairs
-- are pushed and trimmed together at the head, so the first min(lengths) are sound
-- (those made since the tear); the rest cannot be paired: trimmed. seq was read above
-- from the surviving ids, so it never goes back below what survives.
local n_blobs, n_ids = redis.call('LLEN', KEYS[1]), redis.call('LLEN', KEYS[2])
if n_blobs ~= n_ids then
  local sound = math.min(n_blobs, n_ids)
  for _, i in ipairs({1, 2}) do
    if sound == 0 then
      redis.call('DEL', KEYS[i])
    else
      redis.call('LTRIM', KEYS[i], 0, sound - 1)
    end
  end
  n_ids = sound  -- the head stays: only the tail was cut
end

-- The index is kept up to date only while it matches the list (after the repair
-- above); one that does not is left for the next lookup to rebuild: a save with a
-- generated id never scans.
local p_head, n, dups = rs_ck_valid(KEYS[2], KEYS[7], n_ids, head)

local now_us = rs_now_us()
local entry = rs_pad(seq + 1, 16) .. ',' .. rs_pad(math.floor(now_us / 1000), 13) .. ','
  .. ARGV[5] .. ',' .. id .. ',' .. parent
redis.call('LPUSH', KEYS[1], ARGV[2])
redis.call('LPUSH', KEYS[2], entry)
local last = rs_int(keep - 1)
redis.call('LTRIM', KEYS[1], '0', last)
if p_head then  -- trims the id list too
  rs_ck_pushed(KEYS[2], KEYS[7], p_head, n, dups, id, entry, keep)
else
  redis.call('LTRIM', KEYS[2], '0', last)
end
redis.call('DEL', KEYS[3])
for _, i in ipairs({1, 2, 6, 7}) do
  if ttl_ms > 0 then
    redis.call('PEXPIRE', KEYS[i], ARGV[4])
  else
    redis.call('PERSIST', KEYS[i])
  end
end
if memory_ms > 0 then
  rs_forget(KEYS[5], ack)
  rs_remember(KEYS[5], id, now_us, now_us, memory_ms)
end
return {1, entry}
