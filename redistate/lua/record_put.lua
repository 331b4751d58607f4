--[[ record_put: write a versioned record; optional compare-and-set; TTL in the same step.
KEYS[1]  record key
ARGV[1]  expected version: "" = any, "0" = only if absent, "N" = only if the current version is N
ARGV[2]  ttl in ms; "0" = no expiry
ARGV[3]  write id ([A-Za-z0-9_-]+, client-generated; recognises a resent write)
ARGV[4]  schema version of the payload (digits)
ARGV[5]  payload (codec output, stored as is)
returns  {status, version, expires_ms, updated_ms}
         status 1: written. status 2: the current value carries this write id, so this
         is a resend of a write already applied; nothing changed. status 0: conflict,
         version is the current one (0 if absent).
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value.
         Both are raised before any write.
Versions are max(previous + 1, server time in µs): strictly increasing per key and
never repeated, even after delete and re-create, without keeping anything extra.
]]
local expected = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
if (expected ~= '' and not string.match(expected, '^%d+$')) or not ttl_ms or ttl_ms < 0
    or not string.match(ARGV[3], '^[%w_-]+$') or not string.match(ARGV[4], '^%d+$') then
  return redis.error_reply('RSARG malformed arguments to record_put')
end

local current = redis.call('GET', KEYS[1])
local version = 0
if current then
  local env = rs_parse(current)
  if not env then return rs_foreign(KEYS[1]) end
  if env.wid == ARGV[3] then return {2, env.ver, env.exp, env.upd} end
  version = env.ver
end
if expected ~= '' and tonumber(expected) ~= version then
  return {0, version, 0, 0}
end

local now_us = rs_now_us()
local new_version = math.max(version + 1, now_us)
local now_ms = math.floor(now_us / 1000)
local expires_ms = 0
if ttl_ms > 0 then expires_ms = now_ms + ttl_ms end
rs_store(KEYS[1], rs_header(new_version, expires_ms, now_ms, ARGV[4], ARGV[3]) .. ARGV[5], ttl_ms)
return {1, new_version, expires_ms, now_ms}
