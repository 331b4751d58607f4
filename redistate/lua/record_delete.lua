--[[ record_delete: delete a record, optionally only at an expected version or under a lease.
KEYS[1]  record key
KEYS[2]  lock key of the record's id (read only when ARGV[2] is set)
ARGV[1]  expected version (digits, > 0), or "" for any
ARGV[2]  lease value the delete is guarded by, or "" (unguarded)
returns  {status, version}: status 1 = deleted; 0 = not deleted: absent (version 0)
         or at another version than expected
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value,
         RSLOCKLOST if the lease no longer holds the lock.
]]
if ARGV[1] ~= '' and not string.match(ARGV[1], '^[1-9]%d*$') then
  return redis.error_reply('RSARG malformed arguments to record_delete')
end
local lost = rs_guard(KEYS[2], ARGV[2])
if lost then return lost end
local version = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if not version then return {0, 0} end
if ARGV[1] ~= '' and version ~= tonumber(ARGV[1]) then return {0, version} end
redis.call('DEL', KEYS[1])
return {1, version}
