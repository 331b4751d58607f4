--[[ prune_index: take entities a listing found gone (expired, deleted, erased) off an
adapter's index (a Claude Agent SDK project's sessions, redistate.claude; the
conversations of a Pydantic AI scope, redistate.pydantic_ai), each only if its score
says it was last entered over a minute ago: an entity whose first write is on its way
(indexed, not yet written) stays listed once it lands.
KEYS[1]  the index: a zset, entity id -> when last entered (ms)
ARGV     the ids found gone
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
