--[[ lock_acquire: take a lease if it is free, with a fencing number larger than any
     issued before on this name.
KEYS[1]  lock key (value "<token>,<fence>", expires with the lease)
KEYS[2]  fence key of the lock name: the last fence issued, kept as long as the lease
KEYS[3]  wake-up list of the lock name (cleared on acquire: a wake-up left by an
         earlier release is meant for no one now)
ARGV[1]  token (128 random bits, hex)
ARGV[2]  ttl in ms (1 .. 100 years)
returns  {1, fence, ttl_ms}: acquired (or already held with this token: a resent
         acquire, so the caller learns it holds the lease; then the lease's remaining
         ms);
         {0, remaining_ms}: held by someone else for remaining_ms more (-1: the lock
         key has no expiry)
errors   RSARG on malformed arguments; RSINTEGRITY on a fence key that is not a
         number below 2^53 - 1; both before any write.
The fence is max(last fence + 1, server TIME in µs): it grows across restarts without
persistence, RDB restores and failovers (which lose the fence key) as long as the
servers' clocks do not step back by more than the time those took. Written with
rs_int, never as a Lua number (which Redis would store as "1e+15").
unchecked get pttl time
]]
return rs_lock_acquire(ARGV[1], ARGV[2])
