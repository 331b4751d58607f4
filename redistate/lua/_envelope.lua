--[[ _envelope: helpers prepended to every record script (a library, not a script).
A record is one string value:
  "R1,<version:16 digits>,<expires_ms:13 digits>,<updated_ms:13 digits>,<schema>,<write_id>\n<payload>"
The first three fields have fixed widths so scripts read them with GETRANGE and
update them in place with SETRANGE: the payload never passes through Lua (no
copies, and never cjson, which would corrupt user JSON).
]]
local RS_VERSION_AT = 3   -- 0-based offsets for SETRANGE
local RS_EXPIRES_AT = 20

-- The header fields of the record at key: version, expires_ms, updated_ms, write_id.
-- nil if absent; false if the key holds something that is not a record (WRONGTYPE
-- is raised by GETRANGE itself). Multiple returns, not a table: this runs on every write.
local function rs_head(key)
  local head = redis.call('GETRANGE', key, 0, 127)
  if head == '' then
    if redis.call('EXISTS', key) == 1 then return false end
    return nil
  end
  local ver, exp, upd, wid = string.match(head,
    '^R1,(%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d),(%d%d%d%d%d%d%d%d%d%d%d%d%d),(%d+),%d+,([%w_-]+)\n')
  if not ver then return false end
  return tonumber(ver), tonumber(exp), tonumber(upd), wid
end

local function rs_foreign(key)
  return redis.error_reply('RSINTEGRITY value at ' .. key .. ' is not a redistate record')
end

local function rs_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Set or remove the key's TTL; ttl_ms = 0 means no expiry.
local function rs_expire(key, ttl_ms)
  if ttl_ms > 0 then redis.call('PEXPIRE', key, ttl_ms) else redis.call('PERSIST', key) end
end

