--[[ memory_get: items of one namespace of the LangGraph store by key, live ones only,
their TTL refreshed if asked (get, and search's refresh of what it returns).
KEYS[1..2] the namespace's items and exp, see _memory.lua
ARGV[1]  "1": refresh the TTL of each live item found (from now, by its own ttl);
         "0": only read
ARGV[2…] item keys
returns  {now_ms, stored or false per key}: an expired item is false
errors   RSARG on malformed arguments.
unchecked time
]]
if (ARGV[1] ~= '0' and ARGV[1] ~= '1') or #ARGV < 2 then
  return redis.error_reply('RSARG malformed arguments to memory_get')
end
local now = rs_mem_now()
local out = {now}
local refreshed = false
for i = 2, #ARGV do
  local stored = redis.call('HGET', KEYS[1], ARGV[i])
  if rs_mem_live(ARGV[i], stored, now) then
    out[i] = stored
    local ttl = string.match(stored, '^%d+:%d+:(%d+):')
    if ARGV[1] == '1' and ttl ~= '0' then
      redis.call('ZADD', KEYS[2], rs_int(now + tonumber(ttl)), ARGV[i])
      refreshed = true
    end
  else
    out[i] = false
  end
end
if refreshed then rs_mem_expiry() end
return out
