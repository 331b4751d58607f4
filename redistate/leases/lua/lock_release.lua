--[[ lock_release: give a lease back, only if this lease still holds it; wake a waiter.
KEYS[1]  lock key
KEYS[2]  wake-up list waiters block on (BLPOP)
KEYS[3]  the lock's recent writes: lease values released in the last ARGV[2] ms, so
         that a resent release reports the release it made
ARGV[1]  the lease's value "<token>,<fence>"
ARGV[2]  the write memory (rs_memory): how long (ms) released values are remembered
         ("0" = not at all) and an ack (the value of this client's previous release);
         looked up whether or not this is a resend, since only a lease no longer
         held looks (a release of a lease released already reports it)
memory   KEYS[3] ARGV[2]
flags    allow-oom
resent   2
returns  1: released; 2: a resend of a release already made (or a second release of
         the lease); 0: the lease was not held any more (expired or taken over):
         nothing was deleted
errors   RSARG on malformed arguments.
unchecked del get zscore
]]
local memory_ms, _, ack = rs_memory(ARGV[2])
if not memory_ms then return redis.error_reply('RSARG malformed arguments to lock_release') end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  if memory_ms > 0 and redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    rs_resent(KEYS[3], ARGV[1], 0, memory_ms)
    return 2
  end
  return 0
end
redis.call('DEL', KEYS[1])
-- One wake-up token (a lock has one next owner); it expires so it never lingers. The
-- list is empty here: the acquire that took this lease cleared it, and only a holder
-- pushes (a token left by some other way wakes one waiter early, who waits again).
redis.call('RPUSH', KEYS[2], '1')
redis.call('PEXPIRE', KEYS[2], '60000')
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[3], ack)
  rs_remember(KEYS[3], ARGV[1], now_us, now_us, memory_ms)
end
return 1
