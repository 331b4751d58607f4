--[[ lock_extend: push a held lease's expiry out; never brings back an expired one.
KEYS[1]  lock key
KEYS[2]  fence key of the lock name (kept as long as the lease)
ARGV[1]  the lease's value "<token>,<fence>"
ARGV[2]  new ttl in ms, from now
flags    allow-oom
returns  1: extended; 0: not held any more (expired or taken over): nothing changed
errors   RSARG on malformed arguments.
unchecked get
]]
local ttl_ms = rs_ttl(ARGV[2])
if not ttl_ms or ttl_ms == 0 then
  return redis.error_reply('RSARG malformed arguments to lock_extend')
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ttl_ms)
redis.call('PEXPIRE', KEYS[2], ttl_ms)
return 1
