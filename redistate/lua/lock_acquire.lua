--[[ lock_acquire: take a lease if it is free, with the next fencing number.
KEYS[1]  lock key (value "<token>,<fence>", expires with the lease)
KEYS[2]  fencing counter of the lock name (persistent: fences never repeat)
KEYS[3]  wake-up list of the lock name (cleared on acquire: a wake-up left by an
         earlier release is meant for no one now)
ARGV[1]  token (128 random bits, hex)
ARGV[2]  ttl in ms (1 .. 100 years)
returns  {1, fence, ttl_ms}: acquired (or already held with this token: a resent
         acquire, so the caller learns it holds the lease);
         {0, remaining_ms}: held by someone else for remaining_ms more
errors   RSARG on malformed arguments, before any write.
]]
local token, ttl_ms = ARGV[1], rs_ttl(ARGV[2])
if not string.match(token, '^%x+$') or #token ~= 32 or not ttl_ms or ttl_ms == 0 then
  return redis.error_reply('RSARG malformed arguments to lock_acquire')
end
local current = redis.call('GET', KEYS[1])
if current then
  local holder, fence = string.match(current, '^(%x+),(%d+)$')
  if holder == token then return {1, tonumber(fence), redis.call('PTTL', KEYS[1])} end
  return {0, redis.call('PTTL', KEYS[1])}
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ',' .. fence, 'PX', ttl_ms)
redis.call('DEL', KEYS[3])
return {1, fence, ttl_ms}
