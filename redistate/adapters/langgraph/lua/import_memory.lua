--[[ import_memory: restore one exported namespace of the LangGraph store (its items,
_memory.lua describes the keys) unless the store holds a newer version of one of them:
one updated later, or in the same millisecond but different (times are whole ms, and a
put right after an export can share its ms: only an identical item is the file's).
KEYS[1..2] the namespace's items and exp, see _memory.lua
KEYS[3]  tomb: the registry generation a sweep saw when it found the namespace empty
ARGV[1]  the generation memory_announce gave the namespace just before ("0": none)
ARGV[2]  "1" = overwrite newer stored items too (--force), "0" = refuse them
ARGV[3…] sextuples, one per item: key, created ms, updated ms, ttl ms ("0": none), ms
         it has left ("0" exactly when ttl is "0"), value (as the store's codec encoded it)
returns  {1, n}: written, n items changed (0: all were stored as the file has them);
         {0, n}: refused, n stored items are newer than the file's, or as new and
         different (nothing changed);
         {0, "unannounced"}: the namespace has no item and a sweep may be forgetting
         its announcement: announce again and resend (nothing changed).
         Stored items the file does not name are kept.
errors   RSARG on malformed arguments, before any write.
acl      every command checked: an import is many calls, one per item, and a
         command refused to some items and not others would import half
]]
local function bad() return redis.error_reply('RSARG malformed arguments to import_memory') end
if not string.match(ARGV[1], '^%d+$') or #ARGV[1] > 15 or (ARGV[2] ~= '0' and ARGV[2] ~= '1')
    or #ARGV < 8 or (#ARGV - 2) % 6 ~= 0 then
  return bad()
end
for i = 3, #ARGV, 6 do
  for j = 1, 4 do
    if not string.match(ARGV[i + j], '^%d+$') or #ARGV[i + j] > 16 then return bad() end
  end
  if not rs_ttl(ARGV[i + 3]) or not rs_ttl(ARGV[i + 4])
      or (ARGV[i + 3] == '0') ~= (ARGV[i + 4] == '0') then
    return bad()
  end
end
local now = rs_mem_now()
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- As memory_put: a namespace enters the registry before its first item does.
  local gen = tonumber(ARGV[1])
  local tomb = redis.call('GET', KEYS[3])
  if gen == 0 or (tomb and tonumber(tomb) >= gen) then return {0, 'unannounced'} end
  if tomb then redis.call('DEL', KEYS[3]) end
end
local wanted, newer, changed = {}, 0, 0
for i = 3, #ARGV, 6 do
  local key = ARGV[i]
  local value = ARGV[i + 1] .. ':' .. ARGV[i + 2] .. ':' .. ARGV[i + 3] .. ':' .. ARGV[i + 5]
  local old = redis.call('HGET', KEYS[1], key)
  if rs_mem_live(key, old, now) then
    local updated, file = tonumber(string.match(old, '^%d+:(%d+):')), tonumber(ARGV[i + 2])
    if old == value then
      value = false  -- the same item: its expiry stays
    elseif updated >= file then
      newer = newer + 1
    end
  end
  wanted[#wanted + 1] = {key, value, ARGV[i + 4]}
end
if newer > 0 and ARGV[2] == '0' then return {0, newer} end
for _, item in ipairs(wanted) do
  local key, value, left = item[1], item[2], item[3]
  if value then
    changed = changed + 1
    redis.call('HSET', KEYS[1], key, value)
    if left == '0' then
      redis.call('ZREM', KEYS[2], key)
    else
      redis.call('ZADD', KEYS[2], rs_int(now + tonumber(left)), key)
    end
  end
end
rs_mem_purge(now, 100)
rs_mem_expiry()
return {1, changed}
