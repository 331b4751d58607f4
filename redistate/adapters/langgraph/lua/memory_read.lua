--[[ memory_read: every live item of one namespace of the LangGraph store (search).
KEYS[1..2] the namespace's items and exp, see _memory.lua
ARGV     none
returns  {now_ms, key, stored, key, stored…}: the live items, in no order
errors   none.
unchecked hgetall zrangebyscore time
]]
local now = rs_mem_now()
local dead = {}
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', rs_int(now))) do
  dead[key] = true
end
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  if not dead[all[i]] then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
