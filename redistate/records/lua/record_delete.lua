--[[ record_delete: delete a record, optionally only at an expected version or under a lease.
KEYS[1]  record key
KEYS[2]  lock key of the record's id (read only when ARGV[2] is set)
KEYS[3]  the record's recent writes (see record_put; used only when ARGV[4] is not "0")
ARGV[1]  expected version (digits, > 0), or "" for any
ARGV[2]  lease value the delete is guarded by, or "" (unguarded)
ARGV[3]  the delete's own id ([A-Za-z0-9_-], 1-32 chars), remembered (scored by the
         time of the delete) so that a resend reports the delete it made
ARGV[4]  the write memory (rs_memory): how long (ms) ids are remembered ("0" = nothing
         is remembered), whether this is a resend, and an ack
memory   KEYS[3] ARGV[4]
flags    allow-oom
resent   2
returns  {status, version}: status 1 = deleted (version: the deleted one); 2 = a
         resend of a delete already made (version 0); 0 = not deleted: absent (version
         0) or at another version than expected
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value,
         RSLOCKLOST if the lease no longer holds the lock.
unchecked get zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[4])
if (ARGV[1] ~= '' and not string.match(ARGV[1], '^[1-9]%d*$')) or not memory_ms
    or not string.match(ARGV[3], '^[%w_-]+$') or #ARGV[3] > 32 then
  return redis.error_reply('RSARG malformed arguments to record_delete')
end
if memory_ms > 0 and resend then
  local seen = redis.call('ZSCORE', KEYS[3], ARGV[3])
  if seen then  -- a resend of a delete already made
    rs_resent(KEYS[3], ARGV[3], 0, memory_ms)
    return {2, 0}
  end
end
local lost = rs_guard(KEYS[2], ARGV[2])
if lost then return lost end
local version, _, upd, tail, log = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if not version then return {0, 0} end
if ARGV[1] ~= '' and version ~= tonumber(ARGV[1]) then return {0, version} end
redis.call('DEL', KEYS[1])
if memory_ms > 0 then
  local now_us = rs_now_us()
  -- The deleted write may still be resent, and so may this delete.
  -- (A patched record's id is a merge's, which remembered itself.)
  if upd >= math.floor(now_us / 1000) - memory_ms and not log and rs_wid(tail) ~= ack then
    rs_remember(KEYS[3], rs_wid(tail), version, now_us, memory_ms, true)
  end
  rs_forget(KEYS[3], ack)
  rs_remember(KEYS[3], ARGV[3], now_us, now_us, memory_ms)
end
return {1, version}
