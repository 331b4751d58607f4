--[[ import_record: restore one exported record unless the stored one is newer.
KEYS[1]  record key
ARGV[1]  the value as exported: a whole record envelope (header and payload), stored as is
ARGV[2]  ttl in ms to set; "0" = no expiry
ARGV[3]  "1" = overwrite even a newer stored version (--force), "0" = refuse it
returns  {1, version}: written, or already there (an equal version: left as it is);
         {0, version}: refused, the stored record's version is newer (nothing changed)
errors   RSARG on malformed arguments (including a value that is not a record);
         RSINTEGRITY if the key holds something that is not a record. Before any write.
An equal version is the same write, left as it is: an import is idempotent, and a file
older than a rotate-keys never puts old-key ciphertext back (--force does: rotate
again after it). A record written by --force keeps its exported version; later writes
still get versions above it (max(previous + 1, server time in µs)).
acl      every command checked: an import is many calls, one per item, and a
         command refused to some items and not others would import half
]]
local value, ttl_ms = ARGV[1], rs_ttl(ARGV[2])
local version = rs_parse(string.sub(value, 1, 96))
if not version or not ttl_ms or (ARGV[3] ~= '0' and ARGV[3] ~= '1') then
  return redis.error_reply('RSARG malformed arguments to import_record')
end
local stored = rs_head(KEYS[1])
if stored == false then return rs_foreign(KEYS[1]) end
if stored and stored > version and ARGV[3] == '0' then
  return {0, stored}
end
if stored == version and ARGV[3] == '0' then
  return {1, version}
end
if ttl_ms > 0 then
  redis.call('SET', KEYS[1], value, 'PX', ttl_ms)
else
  redis.call('SET', KEYS[1], value)
end
return {1, version}
