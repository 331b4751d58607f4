--[[ record_touch: set a record's TTL and the expiry in its header, in one step.
KEYS[1]  record key
KEYS[2]  lock key of the record's id (read only when ARGV[3] is set)
ARGV[1]  ttl in ms; "0" = no expiry
ARGV[2]  "1" = also return the value (get with touch), "0" = only the expiry
ARGV[3]  lease value the touch is guarded by, or "" (unguarded)
flags    allow-oom
returns  nil if the record does not exist, else {expires_ms, value or ""}; the value is
         the one read before the touch: its header's expiry field is the old one, so the
         caller takes expires_ms from this reply
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value,
         RSLOCKLOST if the lease no longer holds the lock.
The version and write id are kept: a touch is not a write of the data.
]]
local ttl_ms = rs_ttl(ARGV[1])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1') then
  return redis.error_reply('RSARG malformed arguments to record_touch')
end
local lost = rs_guard(KEYS[2], ARGV[3])
if lost then return lost end
local value = ''
if ARGV[2] == '1' then
  -- One GET serves both the header check and the reply (no second read).
  value = redis.call('GET', KEYS[1])
  if not value then return nil end
  if not rs_parse(string.sub(value, 1, 96)) then return rs_foreign(KEYS[1]) end
else
  local version = rs_head(KEYS[1])
  if version == false then return rs_foreign(KEYS[1]) end
  if not version then return nil end
end
local expires_ms = 0
if ttl_ms > 0 then
  expires_ms = math.floor(rs_now_us() / 1000) + ttl_ms
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
else
  redis.call('PERSIST', KEYS[1])
end
redis.call('SETRANGE', KEYS[1], RS_EXPIRES_AT, rs_pad(expires_ms, 13))
return {expires_ms, value}
