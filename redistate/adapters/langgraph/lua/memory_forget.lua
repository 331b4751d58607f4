--[[ memory_forget: take namespaces a sweep found empty out of the LangGraph store's
registry, each only if nobody announced it since the sweep read its generation.
KEYS[1..2] names and gens, see memory_announce.lua
ARGV     pairs: namespace, the generation the sweep read before it found it empty
returns  how many were taken out
errors   RSARG on malformed arguments.
]]
if #ARGV < 2 or #ARGV % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to memory_forget')
end
local gone = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[1], ARGV[i])
    gone = gone + 1
  end
end
return gone
