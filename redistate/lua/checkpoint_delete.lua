--[[ checkpoint_delete: delete every key of a task, guarded by a lease.
KEYS[1]  checkpoint list
KEYS[2]  id list
KEYS[3]  delta log
KEYS[4]  lock key of the task id
ARGV[1]  lease value the delete is guarded by
returns  the number of keys deleted
errors   RSLOCKLOST if the lease no longer holds the lock (nothing deleted).
]]
local lost = rs_guard(KEYS[4], ARGV[1])
if lost then return lost end
return redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
