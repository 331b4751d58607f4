--[[ checkpoint_delete: delete every key of a task, optionally guarded by a lease.
KEYS[1]  checkpoint list
KEYS[2]  id list
KEYS[3]  delta log
KEYS[4]  lock key of the task id (read only when ARGV[1] is set)
KEYS[5]  the task's recent writes (see checkpoint_log; used only when ARGV[3] is not "0")
KEYS[6]  the task's step records (run.step)
KEYS[7]  the task's checkpoint id index (_checkpoint_index)
ARGV[1]  lease value the delete is guarded by, or "" (unguarded)
ARGV[2]  the delete's own id ([A-Za-z0-9_-], 1-64 chars)
ARGV[3]  the write memory (rs_memory): how long (ms) ids are remembered ("0" = nothing
         is remembered), whether this is a resend, and an ack
memory   KEYS[5] ARGV[3]
flags    allow-oom
resent   -1
returns  the number of keys deleted; -1: a resend of a delete that deleted keys
errors   RSARG on malformed arguments; RSLOCKLOST if the lease no longer holds the lock
         (nothing deleted).
The recent writes are kept: a resend of a save, log or this delete must still be known.
unchecked get zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[3])
if not memory_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 64 then
  return redis.error_reply('RSARG malformed arguments to checkpoint_delete')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[5], ARGV[2]) then
  rs_resent(KEYS[5], ARGV[2], 0, memory_ms)
  return -1
end
local lost = rs_guard(KEYS[4], ARGV[1])
if lost then return lost end
local deleted = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7])
if deleted > 0 and memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[5], ack)
  rs_remember(KEYS[5], ARGV[2], now_us, now_us, memory_ms)
end
return deleted
