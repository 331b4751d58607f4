--[[ checkpoint_log: append a delta (a merge patch) after a task's latest checkpoint.
KEYS[1]  checkpoint list
KEYS[2]  id list (its newest entry names the snapshot the delta follows)
KEYS[3]  delta log: "D1,<delta_id>,<snapshot_id>,<created_ms:13>\n<blob>"
KEYS[4]  lock key of the task id (read only when ARGV[6] is set)
KEYS[5]  the task's recent writes: ids of deltas appended (and of deletes made) in the
         last ARGV[7] ms, scored by time in µs (used only when ARGV[7] is not "0")
KEYS[6]  the task's step records (run.step): given the same expiry as the history
KEYS[7]  the task's checkpoint id index (_checkpoint_index): given the same expiry
ARGV[1]  delta id ([A-Za-z0-9_-], 1-64 chars)
ARGV[2]  the delta blob (stored as is)
ARGV[3]  the most deltas the log may hold (1-100000)
ARGV[4]  ttl in ms for every key of the task; "0" = no expiry
ARGV[5]  "1" = follow the task's current expiry (the checkpoint list's; ARGV[4] if the
         task has no checkpoint yet), "0" = set ARGV[4] on every key
ARGV[6]  lease value the write is guarded by, or "" (unguarded)
ARGV[7]  the write memory (rs_memory): how long (ms) a delta id is remembered ("0" =
         nothing is remembered), whether to look it up (a resend, or an id the caller
         chose: it may be sent again as a new call), and an ack
memory   KEYS[5] ARGV[7]
ARGV[8]  optional: "=<snapshot id>" ("=" alone: no checkpoint) when the blob is sealed
         for the checkpoint it follows (signing keys): appended only if the newest
         checkpoint is that one; absent or "": whichever is newest
resent   0
returns  {1, length}: appended; {0, length}: this delta was appended before (a resend:
         it is the newest, or remembered even if a save has compacted it away since),
         nothing changed; {2, snapshot id}: the newest checkpoint is another than
         ARGV[8] names ("" for none): nothing written, seal it for that one and resend
errors   RSARG on malformed arguments; RSLOCKLOST if the lease no longer holds the lock;
         RSFULL if the log holds ARGV[3] deltas already (save a checkpoint to compact
         it). All before any write.
Every key of a task always carries the same expiry: the log never outlives its task.
unchecked get llen zscore
]]
local id, limit, ttl_ms = ARGV[1], tonumber(ARGV[3]), rs_ttl(ARGV[4])
local memory_ms, resend, ack = rs_memory(ARGV[7])
local sealed_for = ARGV[8] or ''
if (sealed_for ~= '' and (not string.match(sealed_for, '^=[%w_-]*$') or #sealed_for > 65))
    or not string.match(id, '^[%w_-]+$') or #id > 64 or not string.match(ARGV[3], '^%d+$')
    or limit < 1 or limit > 100000 or not ttl_ms or (ARGV[5] ~= '0' and ARGV[5] ~= '1')
    or not memory_ms then
  return redis.error_reply('RSARG malformed arguments to checkpoint_log')
end
local length = redis.call('LLEN', KEYS[3])
local last = redis.call('LINDEX', KEYS[3], -1)
if (last and string.match(last, '^D1,([%w_-]+),') == id)
    or (memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[5], id)) then
  rs_resent(KEYS[5], id, 0, memory_ms)
  return {0, length}
end
local lost = rs_guard(KEYS[4], ARGV[6])
if lost then return lost end
if length >= limit then
  return redis.error_reply('RSFULL ' .. KEYS[3] .. ' holds ' .. length
    .. ' deltas, the limit: save a checkpoint to compact them')
end
local head = redis.call('LINDEX', KEYS[2], 0)
local snapshot = ''
if head then snapshot = string.match(head, '^%d+,%d+,%d+,([%w_-]+),') or '' end
if sealed_for ~= '' and string.sub(sealed_for, 2) ~= snapshot then return {2, snapshot} end
local now_us = rs_now_us()
redis.call('RPUSH', KEYS[3], 'D1,' .. id .. ',' .. snapshot .. ','
  .. rs_pad(math.floor(now_us / 1000), 13) .. '\n' .. ARGV[2])
if ARGV[5] == '1' then
  local current = redis.call('PTTL', KEYS[1])
  if current > 0 then ttl_ms = current elseif current == -1 then ttl_ms = 0 end
end
for _, i in ipairs({1, 2, 3, 6, 7}) do
  if ttl_ms > 0 then
    redis.call('PEXPIRE', KEYS[i], ttl_ms)
  else
    redis.call('PERSIST', KEYS[i])
  end
end
if memory_ms > 0 then
  rs_forget(KEYS[5], ack)
  rs_remember(KEYS[5], id, now_us, now_us, memory_ms)
end
return {1, length + 1}
