--[[ pai_details: set a Pydantic AI conversation's title or metadata, or both
(redistate.pydantic_ai), only if its record is still at the revision and the details
version the caller read (a compare-and-set: the caller checked the values it expects
against what it read, which may be encrypted). The revision and save time are kept.
KEYS[1]  the record (pai_write.lua): title and meta encoded, dver their version
ARGV[1]  the revision read
ARGV[2]  the details version read ("0": never set)
ARGV[3]  the title: "-" left as it is, "0" cleared, "1" set to ARGV[4]
ARGV[5]  the metadata: the same, ARGV[6] its value
returns  the new details version; 0 if the record moved on (nothing written)
errors   RSARG on malformed arguments, before any write.
unchecked hget
]]
if #ARGV ~= 6 or ARGV[1] == '' or not tonumber(ARGV[2]) then
  return redis.error_reply('RSARG malformed arguments to pai_details')
end
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1]
    or (redis.call('HGET', KEYS[1], 'dver') or '0') ~= ARGV[2] then
  return 0
end
local fields = {{'title', ARGV[3], ARGV[4]}, {'meta', ARGV[5], ARGV[6]}}
for _, f in ipairs(fields) do
  if f[2] == '0' then
    redis.call('HDEL', KEYS[1], f[1])
  elseif f[2] == '1' then
    redis.call('HSET', KEYS[1], f[1], f[3])
  end
end
return redis.call('HINCRBY', KEYS[1], 'dver', 1)
