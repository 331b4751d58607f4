--[[ claude_prune: take sessions a listing found gone (expired, deleted, erased) off a
Claude Agent SDK project's index (redistate.claude), each only if it was last entered
over a minute ago: a session whose first append is on its way (indexed, not yet
written) stays listed once it lands.
KEYS[1]  the project's sessions: a zset, session id -> when last entered (claude_index)
ARGV     the session ids found gone
returns  how many were taken off
unchecked time zscore
]]
local before = math.floor(rs_now_us() / 1000) - 60000
local gone = {}
for i = 1, #ARGV do
  local at = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if at and tonumber(at) < before then gone[#gone + 1] = ARGV[i] end
end
-- In slices: unpack() of thousands of values would overflow Lua's C stack.
local removed = 0
for first = 1, #gone, 1000 do
  removed = removed + redis.call('ZREM', KEYS[1], unpack(gone, first, math.min(first + 999, #gone)))
end
return removed
