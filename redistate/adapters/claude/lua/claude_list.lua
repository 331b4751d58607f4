--[[ claude_list: the sessions a Claude Agent SDK project's index lists (redistate.claude),
after taking out those whose time has passed (expired: see claude_index.lua).
KEYS[1]  the project's sessions: a zset, session id -> time after which it has expired
returns  the session ids (some may be deleted: a listing reads each session's hash)
unchecked zrangebyscore zcard
]]
local now_ms = math.floor(rs_now_us() / 1000)
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. rs_int(now_ms), '+inf')
if redis.call('ZCARD', KEYS[1]) > #found then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', rs_int(now_ms))
end
return found
