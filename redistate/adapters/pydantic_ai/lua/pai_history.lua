--[[ pai_history: a Pydantic AI conversation's history up to an entry, read in one
round trip by following each entry's parent (redistate.pydantic_ai).
KEYS[1]  the entries: a hash, entry id -> encoded entry (pai_write.lua)
KEYS[2]  the parents: a hash, entry id -> the id of the entry before it ("" for none)
ARGV[1]  the last entry's id
ARGV[2]  at most this many entries, the last ones ("-1": all)
returns  {1, id, parent, entry, ...} oldest first; {0, id} if an entry on the way
         is not stored here
errors   RSARG on malformed arguments.
unchecked hget
]]
local limit = tonumber(ARGV[2])
if #ARGV ~= 2 or not limit or ARGV[1] == '' then
  return redis.error_reply('RSARG malformed arguments to pai_history')
end
local ids, parents = {}, {}
local id = ARGV[1]
while id ~= '' and (limit < 0 or #ids < limit) do
  local parent = redis.call('HGET', KEYS[2], id)
  if not parent then
    return {0, id}
  end
  ids[#ids + 1] = id
  parents[#ids] = parent
  id = parent
end
local out = {1}
for i = #ids, 1, -1 do
  out[#out + 1] = ids[i]
  out[#out + 1] = parents[i]
  out[#out + 1] = redis.call('HGET', KEYS[1], ids[i]) or ''
end
return out
