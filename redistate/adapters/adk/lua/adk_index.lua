--[[ adk_index: enter a session in its user's index (before its creation), or move it
up to its last update time (with each append), keeping the index alive as long as the
sessions it lists.
KEYS[1]  the user's sessions: a zset, session id -> last update time (seconds)
ARGV[1]  the session id
ARGV[2]  its time (seconds)
ARGV[3]  "new": enter it (if absent); "touch": move it up (if present: a deleted
         session is not brought back)
ARGV[4]  the sessions' ttl in ms ("0": they do not expire): the index lives at least as
         long from now
returns  1
errors   RSARG on malformed arguments, before any write.
unchecked pttl zadd zscore
]]
local ttl_ms = rs_ttl(ARGV[4])
if #ARGV ~= 4 or not tonumber(ARGV[2]) or not ttl_ms or (ARGV[3] ~= 'new' and ARGV[3] ~= 'touch') then
  return redis.error_reply('RSARG malformed arguments to adk_index')
end
local left = redis.call('PTTL', KEYS[1])
if ARGV[3] == 'new' then
  redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])
elseif not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 1
else
  redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[2], ARGV[1])
end
if ttl_ms == 0 then
  redis.call('PERSIST', KEYS[1])
elseif left ~= -1 and left < ttl_ms then
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
end
return 1
