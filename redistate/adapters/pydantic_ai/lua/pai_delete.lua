--[[ pai_delete: delete a Pydantic AI conversation (redistate.pydantic_ai), its record,
entries and parents, only if its record is at the revision the caller read.
KEYS[1]  the record (pai_write.lua); KEYS[2] its entries; KEYS[3] its parents
ARGV[1]  the revision read
returns  1 deleted; 0 the stored revision is another, or there is no record
unchecked del hget
]]
if #ARGV ~= 1 or ARGV[1] == '' then
  return redis.error_reply('RSARG malformed arguments to pai_delete')
end
if redis.call('HGET', KEYS[1], 'rev') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
