--[[ step_record: record a durable step's start, result or failure (run.step), only
while the lease still holds the task: a stale owner's record never overwrites the
current owner's. A result, once recorded, is final.
KEYS[1]  the task's step records, a hash by step name
KEYS[2]  the task's checkpoint list: the records take its expiry
KEYS[3]  lock key of the task id
KEYS[4]  the task's delta log: its expiry, when the task has no checkpoint yet
ARGV[1]  the step's name
ARGV[2]  the record: "S1,<status>,<idempotent>,<fence>,<started_ms>,<ended_ms>,<sha256
         or <key id>:<HMAC hex> with signing keys>\n..."
ARGV[3]  lease value "<token>,<fence>" the write is guarded by, or "" (unguarded)
ARGV[4]  ttl in ms when the task has neither ("0": no expiry)
resent   2
returns  {1}: recorded; {2}: a resend, the same record is found (before the fence
         check), nothing changes; {0, record}: the step already has a result,
         `record`; nothing written
errors   RSARG on malformed arguments, RSLOCKLOST if the lease no longer holds the
         lock (checked after the resend lookup). Both before any write.
unchecked get hget
]]
local ttl_ms = rs_ttl(ARGV[4])
if ARGV[1] == '' or not ttl_ms or string.sub(ARGV[2], 1, 3) ~= 'S1,' then
  return redis.error_reply('RSARG malformed arguments to step_record')
end
-- The same record already there is this write's resend (records carry their times):
-- reported as made even if the lease was lost since, like every guarded resend.
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored == ARGV[2] then return {2} end
local lost = rs_guard(KEYS[3], ARGV[3])
if lost then return lost end
if stored and string.sub(stored, 1, 5) == 'S1,d,' then return {0, stored} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
-- Every key of a task carries the same expiry (checkpoint_save and _log set it on
-- the records too): they never outlive the task, nor it them.
local current = redis.call('PTTL', KEYS[2])
if current == -2 then current = redis.call('PTTL', KEYS[4]) end
if current > 0 then ttl_ms = current elseif current == -1 then ttl_ms = 0 end
if ttl_ms > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
else
  redis.call('PERSIST', KEYS[1])
end
return {1}
