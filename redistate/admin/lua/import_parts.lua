--[[ import_parts: restore one exported entity held in a few keys of its hash slot, each
a hash, a sorted set or a set (redistate.admin.backup_parts), unless the store holds a
different one; or merge an exported index (one sorted set) into the stored one.
KEYS[1..n]  the entity's keys, in the order of ARGV[4]
ARGV[1]  ttl in ms for every key; "0" = no expiry
ARGV[2]  "1" = replace a different stored entity (--force), "0" = refuse
ARGV[3]  "whole": the entity as the file has it; or "merge": an index, one sorted set
         merged into the stored one (a member keeps the later score; the index lives
         at least the ttl, or for ever with "0"), never refused, never shrunk
ARGV[4]  the keys' types, a letter each: "h" a hash, "z" a sorted set, "s" a set
ARGV[5 .. 4+n]  how many items each key has (0-1000000)
ARGV[5+n ..]    the items, key by key: field, value (a hash); member, score (a sorted
         set); member (a set)
returns  {1, 1}: written (an index: it changed); {1, 0}: the same content is stored
         (nothing changed); {0, 0}: refused, a different entity is stored (unchanged)
errors   RSARG on malformed arguments (a score that is not a number...), before any
         write.
acl      every command checked: an import is many calls, one per entity, and a
         command refused to some and not others would import half
]]
local function bad(what)
  return redis.error_reply('RSARG malformed ' .. (what or 'arguments') .. ' to import_parts')
end
local ttl_ms, force, mode, types = rs_ttl(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local n = #KEYS
if not ttl_ms or (force ~= '0' and force ~= '1') or (mode ~= 'whole' and mode ~= 'merge')
    or n == 0 or not types or #types ~= n or string.find(types, '[^hzs]')
    or (mode == 'merge' and types ~= 'z') or #ARGV < 4 + n then
  return bad()
end
local WIDTH = {h = 2, z = 2, s = 1}
local parts, at = {}, 5 + n
for i = 1, n do
  local count = ARGV[4 + i]
  if not string.match(count, '^%d+$') or #count > 7 then return bad() end
  local kind = string.sub(types, i, i)
  parts[i] = {kind = kind, first = at, last = at + WIDTH[kind] * tonumber(count) - 1}
  at = parts[i].last + 1
end
if at ~= #ARGV + 1 then return bad() end
-- A score as the codec writes one: decimal digits, a fraction, an exponent. tonumber()
-- alone would take "nan", "inf" and "0x10", which ZADD refuses (after earlier writes)
-- or reads otherwise.
local function decimal(text)
  return string.match(text, '^%-?%d+$') or string.match(text, '^%-?%d+%.%d+$')
    or string.match(text, '^%-?%d+%.?%d*e[-+]%d+$')
end
for i = 1, n do
  if parts[i].kind == 'z' then
    for j = parts[i].first + 1, parts[i].last, 2 do
      if #ARGV[j] > 32 or not decimal(ARGV[j]) then return bad('score ' .. ARGV[j]) end
    end
  end
end

-- ZADD's arguments for items first..last of a sorted set: score, member pairs.
local function scored(first, last)
  local args = {}
  for k = first, last, 2 do
    args[#args + 1] = ARGV[k + 1]
    args[#args + 1] = ARGV[k]
  end
  return args
end

if mode == 'merge' then
  local left = redis.call('PTTL', KEYS[1])  -- before: -2 absent, -1 no expiry
  local changed = 0
  -- In slices of 500 pairs: Lua's unpack() is limited by its C stack.
  for j = parts[1].first, parts[1].last, 1000 do
    local stop = math.min(j + 999, parts[1].last)
    changed = changed + redis.call('ZADD', KEYS[1], 'GT', 'CH', unpack(scored(j, stop)))
  end
  if redis.call('EXISTS', KEYS[1]) == 0 then return {1, 0} end
  if ttl_ms == 0 then
    if left >= 0 then
      redis.call('PERSIST', KEYS[1])
      changed = changed + 1
    end
  elseif left == -2 or (left >= 0 and left < ttl_ms) then
    redis.call('PEXPIRE', KEYS[1], ttl_ms)
  end
  return {1, math.min(changed, 1)}
end

-- Whether key i holds exactly the items given for it.
local function same(i)
  local part, stored = parts[i], nil
  local width = WIDTH[part.kind]
  if part.kind == 'z' then
    stored = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', '+inf', 'WITHSCORES')
  elseif part.kind == 'h' then
    stored = redis.call('HGETALL', KEYS[i])
  else
    stored = redis.call('SMEMBERS', KEYS[i])
  end
  if #stored ~= part.last - part.first + 1 then return false end
  local found = {}
  for j = 1, #stored, width do
    if width == 2 then found[stored[j]] = stored[j + 1] else found[stored[j]] = true end
  end
  for j = part.first, part.last, width do
    local value = found[ARGV[j]]
    if value == nil then return false end
    if part.kind == 'z' then
      if tonumber(value) ~= tonumber(ARGV[j + 1]) then return false end
    elseif part.kind == 'h' and value ~= ARGV[j + 1] then
      return false
    end
  end
  return true
end

local exists = 0
for i = 1, n do exists = exists + redis.call('EXISTS', KEYS[i]) end
if exists > 0 then
  local all = true
  for i = 1, n do
    if all and not same(i) then all = false end
  end
  if all then return {1, 0} end
  if force == '0' then return {0, 0} end
  for i = 1, n do redis.call('DEL', KEYS[i]) end
end
for i = 1, n do
  local part = parts[i]
  for j = part.first, part.last, 1000 do
    local stop = math.min(j + 999, part.last)
    if part.kind == 'z' then
      redis.call('ZADD', KEYS[i], unpack(scored(j, stop)))
    elseif part.kind == 'h' then
      redis.call('HSET', KEYS[i], unpack(ARGV, j, stop))
    else
      redis.call('SADD', KEYS[i], unpack(ARGV, j, stop))
    end
  end
end
if ttl_ms > 0 then
  for i = 1, n do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
return {1, 1}
