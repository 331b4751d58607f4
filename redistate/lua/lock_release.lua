--[[ lock_release: give a lease back, only if this lease still holds it; wake a waiter.
KEYS[1]  lock key
KEYS[2]  wake-up list waiters block on (BLPOP)
ARGV[1]  the lease's value "<token>,<fence>"
returns  1: released; 0: the lease was not held any more (expired or taken over):
         nothing was deleted
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
-- One wake-up token (a lock has one next owner); it expires so it never lingers.
redis.call('DEL', KEYS[2])
redis.call('RPUSH', KEYS[2], '1')
redis.call('PEXPIRE', KEYS[2], 60000)
return 1
