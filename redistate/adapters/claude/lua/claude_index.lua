--[[ claude_index: enter a Claude Agent SDK session in its project's index, or note that
it was written to again (before an object's first append to it, then with each
append), keeping the index alive as long as the sessions it lists.
KEYS[1]  the project's sessions: a zset, session id -> when it was last entered (ms,
         this server's clock): prune_index takes out only entries older than a minute
         whose session is gone, never one whose append is on its way
ARGV[1]  the session id
ARGV[2]  the sessions' ttl in ms ("0": they do not expire): the index lives at least
         that and a minute from now
returns  1
errors   RSARG on malformed arguments, before any write.
unchecked pttl time zadd
]]
local ttl_ms = rs_ttl(ARGV[2])
if #ARGV ~= 2 or ARGV[1] == '' or not ttl_ms then
  return redis.error_reply('RSARG malformed arguments to claude_index')
end
local left = redis.call('PTTL', KEYS[1])
redis.call('ZADD', KEYS[1], 'GT', rs_int(math.floor(rs_now_us() / 1000)), ARGV[1])
if ttl_ms == 0 then
  redis.call('PERSIST', KEYS[1])
elseif left ~= -1 and left < ttl_ms + 60000 then
  redis.call('PEXPIRE', KEYS[1], rs_int(ttl_ms + 60000))
end
return 1
