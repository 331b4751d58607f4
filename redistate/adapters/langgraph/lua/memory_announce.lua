--[[ memory_announce: enter a namespace of the LangGraph store in its registry, before
the put that creates it (memory_put refuses to create an unannounced namespace).
KEYS[1]  names: a zset of every namespace, all at score 0 (lexicographic order)
KEYS[2]  gens: a hash, namespace -> the generation of its last announcement; its field
         "" counts generations (no namespace is empty)
ARGV[1]  the namespace (labels joined by ".")
returns  the namespace's new generation: larger than every one given before, so a
         sweep that saw an older one cannot forget it (memory_forget.lua)
errors   RSARG on malformed arguments.
unchecked hincrby
]]
if ARGV[1] == '' or #ARGV ~= 1 then
  return redis.error_reply('RSARG malformed arguments to memory_announce')
end
local gen = redis.call('HINCRBY', KEYS[2], '', 1)
redis.call('HSET', KEYS[2], ARGV[1], gen)
redis.call('ZADD', KEYS[1], 0, ARGV[1])
return gen
