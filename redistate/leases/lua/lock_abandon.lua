--[[ lock_abandon: undo an acquire whose outcome the caller never learned (cancelled,
     or its reply lost): delete the lock if this token holds it, and wake a waiter.
KEYS[1]  lock key
KEYS[2]  wake-up list
ARGV[1]  the token of the abandoned acquire
flags    allow-oom
returns  1: it held the lock and released it; 0: it did not hold it
unchecked get
]]
local current = redis.call('GET', KEYS[1])
if not current or string.sub(current, 1, #ARGV[1] + 1) ~= ARGV[1] .. ',' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
redis.call('RPUSH', KEYS[2], '1')
redis.call('PEXPIRE', KEYS[2], 60000)
return 1
