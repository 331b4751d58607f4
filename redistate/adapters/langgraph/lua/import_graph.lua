--[[ import_graph: restore one exported LangGraph thread (its seven keys, lua/_graph.lua
describes each) unless the store holds a different one.
KEYS[1..7]  the thread's keys: cp (hash), idx (zset), blobs, refs, writes (hashes),
         widx, runs (zsets)
ARGV[1]  ttl in ms for every key; "0" = no expiry
ARGV[2]  "1" = replace a different stored thread (--force), "0" = refuse
ARGV[3 .. 9]  how many pairs each key has, c1..c7 (0-1000000 each)
ARGV[10 ..]   the pairs, key by key: field, value for a hash; member, score for a zset
returns  {1, 1}: written; {1, 0}: the same content is stored (nothing changed);
         {0, 0}: refused, a different thread is stored (unchanged)
errors   RSARG on malformed arguments (a score that is not a number...), before any
         write.
acl      every command checked: an import is many calls, one per item, and a
         command refused to some items and not others would import half
]]
local ZSET = {[2] = true, [6] = true, [7] = true}
local ttl_ms = rs_ttl(ARGV[1])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1') or #ARGV < 9 then
  return redis.error_reply('RSARG malformed arguments to import_graph')
end
local starts, at = {}, 10
for i = 1, 7 do
  local count = ARGV[2 + i]
  if not string.match(count, '^%d+$') or #count > 7 then
    return redis.error_reply('RSARG malformed arguments to import_graph')
  end
  starts[i] = {at, tonumber(count)}
  at = at + 2 * tonumber(count)
end
if at ~= #ARGV + 1 then return redis.error_reply('RSARG malformed arguments to import_graph') end
for i = 1, 7 do
  if ZSET[i] then
    for j = starts[i][1], starts[i][1] + 2 * starts[i][2] - 1, 2 do
      if not tonumber(ARGV[j + 1]) then
        return redis.error_reply('RSARG malformed score to import_graph: ' .. ARGV[j + 1])
      end
    end
  end
end

-- Whether key i holds exactly the pairs given for it.
local function same(i)
  local first, count = starts[i][1], starts[i][2]
  local stored
  if ZSET[i] then
    stored = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', '+inf', 'WITHSCORES')
  else
    stored = redis.call('HGETALL', KEYS[i])
  end
  if #stored ~= 2 * count then return false end
  local found = {}
  for j = 1, #stored, 2 do found[stored[j]] = stored[j + 1] end
  for j = first, first + 2 * count - 1, 2 do
    local value = found[ARGV[j]]
    if value == nil then return false end
    if ZSET[i] then
      if tonumber(value) ~= tonumber(ARGV[j + 1]) then return false end
    elseif value ~= ARGV[j + 1] then
      return false
    end
  end
  return true
end

local exists = 0
for i = 1, 7 do exists = exists + redis.call('EXISTS', KEYS[i]) end
if exists > 0 then
  local all = true
  for i = 1, 7 do
    if all and not same(i) then all = false end
  end
  if all then return {1, 0} end
  if ARGV[2] == '0' then return {0, 0} end
  for i = 1, 7 do redis.call('DEL', KEYS[i]) end
end
for i = 1, 7 do
  local first, count = starts[i][1], starts[i][2]
  -- In slices of 500 pairs: Lua's unpack() is limited by its C stack.
  for j = first, first + 2 * count - 1, 1000 do
    local stop = math.min(j + 999, first + 2 * count - 1)
    if ZSET[i] then
      local args = {}
      for k = j, stop, 2 do
        args[#args + 1] = ARGV[k + 1]
        args[#args + 1] = ARGV[k]
      end
      redis.call('ZADD', KEYS[i], unpack(args))
    else
      redis.call('HSET', KEYS[i], unpack(ARGV, j, stop))
    end
  end
end
if ttl_ms > 0 then
  for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
return {1, 1}
