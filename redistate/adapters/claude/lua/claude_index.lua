--[[ claude_index: enter a Claude Agent SDK session in its project's index (before its
first append, then with each append to its main transcript), with the time until which
it may live, keeping the index alive as long as the sessions it lists.
KEYS[1]  the project's sessions: a zset, session id -> the time (ms, this server's
         clock) after which it has expired (+inf: it does not expire)
ARGV[1]  the session id
ARGV[2]  the sessions' ttl in ms ("0": they do not expire)
returns  1
errors   RSARG on malformed arguments, before any write.
unchecked pttl
]]
local ttl_ms = rs_ttl(ARGV[2])
if #ARGV ~= 2 or ARGV[1] == '' or not ttl_ms then
  return redis.error_reply('RSARG malformed arguments to claude_index')
end
local left = redis.call('PTTL', KEYS[1])
if ttl_ms == 0 then
  redis.call('ZADD', KEYS[1], 'GT', '+inf', ARGV[1])
  redis.call('PERSIST', KEYS[1])
  return 1
end
-- A minute past its own TTL: the session's keys expire by another server's clock (a
-- cluster), and an entry is taken out only when its time has passed.
local now_ms = math.floor(rs_now_us() / 1000)
redis.call('ZADD', KEYS[1], 'GT', rs_int(now_ms + ttl_ms + 60000), ARGV[1])
if left ~= -1 and left < ttl_ms + 60000 then
  redis.call('PEXPIRE', KEYS[1], rs_int(ttl_ms + 60000))
end
return 1
