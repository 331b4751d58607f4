--[[ _envelope: shared helpers prepended to every record script (not a script itself).
A record is one string value: "R1,<version>,<expires_ms>,<updated_ms>,<schema>,<write_id>\n<payload>".
The payload is codec output and is never decoded here (cjson would corrupt user JSON).
]]
local function rs_parse(value)
  if string.sub(value, 1, 3) ~= 'R1,' then return nil end
  local nl = string.find(value, '\n', 4, true)
  if not nl then return nil end
  local ver, exp, upd, schema, wid =
    string.match(string.sub(value, 4, nl - 1), '^(%d+),(%d+),(%d+),(%d+),([%w_-]*)$')
  if not ver then return nil end
  return {ver = tonumber(ver), exp = tonumber(exp), upd = tonumber(upd), schema = schema,
          wid = wid, payload_at = nl + 1}
end

local function rs_header(ver, exp, upd, schema, wid)
  return string.format('R1,%.0f,%.0f,%.0f,%s,%s\n', ver, exp, upd, schema, wid)
end

local function rs_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function rs_foreign(key)
  return redis.error_reply('RSINTEGRITY value at ' .. key .. ' is not a redistate record')
end

local function rs_store(key, value, ttl_ms)
  if ttl_ms > 0 then
    redis.call('SET', key, value, 'PX', ttl_ms)
  else
    redis.call('SET', key, value)
  end
end

