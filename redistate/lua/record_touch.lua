--[[ record_touch: set a record's TTL (and the expiry in its header) in one step.
KEYS[1]  record key
ARGV[1]  ttl in ms; "0" = no expiry
ARGV[2]  "1" = return the whole value (get with touch), "0" = return only the expiry
returns  nil if the record does not exist, else {expires_ms, value or ""}
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value.
The version and write id are kept: a touch is not a write of the data.
]]
local ttl_ms = tonumber(ARGV[1])
if not ttl_ms or ttl_ms < 0 or (ARGV[2] ~= '0' and ARGV[2] ~= '1') then
  return redis.error_reply('RSARG malformed arguments to record_touch')
end
local current = redis.call('GET', KEYS[1])
if not current then return nil end
local env = rs_parse(current)
if not env then return rs_foreign(KEYS[1]) end
local expires_ms = 0
if ttl_ms > 0 then expires_ms = math.floor(rs_now_us() / 1000) + ttl_ms end
local value = rs_header(env.ver, expires_ms, env.upd, env.schema, env.wid)
  .. string.sub(current, env.payload_at)
rs_store(KEYS[1], value, ttl_ms)
if ARGV[2] == '1' then return {expires_ms, value} end
return {expires_ms, ''}
