--[[ record_touch: set a record's TTL and the expiry in its header, in one step.
KEYS[1]  record key
ARGV[1]  ttl in ms; "0" = no expiry
ARGV[2]  "1" = also return the whole value (get with touch), "0" = only the expiry
returns  nil if the record does not exist, else {expires_ms, value or ""}
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value.
The version and write id are kept: a touch is not a write of the data.
]]
local ttl_ms = rs_ttl(ARGV[1])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1') then
  return redis.error_reply('RSARG malformed arguments to record_touch')
end
local version = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if not version then return nil end
local expires_ms = 0
if ttl_ms > 0 then
  expires_ms = math.floor(rs_now_us() / 1000) + ttl_ms
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
else
  redis.call('PERSIST', KEYS[1])
end
redis.call('SETRANGE', KEYS[1], RS_EXPIRES_AT, string.format('%013.0f', expires_ms))
if ARGV[2] == '1' then return {expires_ms, redis.call('GET', KEYS[1])} end
return {expires_ms, ''}
