--[[ record_delete: delete a record only if it has the expected version.
KEYS[1]  record key
ARGV[1]  expected version (digits, > 0)
returns  {status, version}: status 1 = deleted; 0 = conflict, version is the current
         one (0 if absent)
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value.
]]
if not string.match(ARGV[1], '^[1-9]%d*$') then
  return redis.error_reply('RSARG malformed arguments to record_delete')
end
local version = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if not version then return {0, 0} end
if version ~= tonumber(ARGV[1]) then return {0, version} end
redis.call('DEL', KEYS[1])
return {1, version}
