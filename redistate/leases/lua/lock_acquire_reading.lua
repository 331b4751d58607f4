--[[ lock_acquire_reading: lock_acquire, then reads of other keys of the lock's hash
slot in the same step, so that taking a lease and reading what its holder starts from
(a task run's entry: the newest checkpoint, the delta log, the step records) is one
call, and the reads see the keys as they are right after the lease was taken.
KEYS[1..3]  as lock_acquire's
KEYS[4..]   the keys to read (lists or hashes)
ARGV[1..2]  as lock_acquire's
ARGV[3..]   for each key from KEYS[4] on, in order, what to read: "<start>:<stop>" an
            LRANGE, "h" an HGETALL (its fields and values, flat)
returns     lock_acquire's reply; when acquired, with one more element: the reads'
            replies in order
errors      as lock_acquire's; RSARG on a malformed read. All before any write.
unchecked get pttl time
]]
if #ARGV ~= #KEYS - 1 then
  return redis.error_reply('RSARG malformed arguments to lock_acquire_reading')
end
local ranges = {}
for i = 3, #ARGV do
  if ARGV[i] ~= 'h' then
    local start, stop = string.match(ARGV[i], '^(-?%d+):(-?%d+)$')
    if not start then
      return redis.error_reply('RSARG malformed arguments to lock_acquire_reading')
    end
    ranges[i] = {start, stop}
  end
end
local reply = rs_lock_acquire(ARGV[1], ARGV[2])
if reply[1] ~= 1 then return reply end  -- held by another, or an error reply
local reads = {}
for i = 3, #ARGV do
  local range = ranges[i]
  if range then
    reads[i - 2] = redis.call('LRANGE', KEYS[i + 1], range[1], range[2])
  else
    reads[i - 2] = redis.call('HGETALL', KEYS[i + 1])
  end
end
reply[4] = reads
return reply
