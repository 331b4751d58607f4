--[[ import_adk: restore one exported Google ADK session, user or app (redistate.adk):
its hash and its collection, unless the store holds a different one. A user's sessions
and an app's users are indexes: merged into what is stored (a session keeps its later
time), never a reason to refuse, never shrunk.
KEYS[1]  the hash: a session's state and times, a user's or an app's state
KEYS[2]  the collection: a session's events (a list), a user's sessions (a zset), an
         app's users (a set)
ARGV[1]  the collection's type: "list", "zset" or "set"
ARGV[2]  "1" = replace a different stored entity (--force), "0" = refuse
ARGV[3]  the hash's ttl in ms; "0" = no expiry
ARGV[4]  the collection's ttl in ms; "0" = no expiry
ARGV[5]  how many field, value pairs the hash has (n)
ARGV[6 .. 5+2n]  the pairs
ARGV[6+2n ..]    the collection: elements oldest first (a list), members (a set), or
         member, score pairs (a zset)
returns  {1, 1}: written; {1, 0}: the same content is stored (nothing changed);
         {0, 0}: refused, a different session or state is stored (unchanged)
errors   RSARG on malformed arguments (a score that is not a number...), before any
         write.
acl      every command checked: an import is many calls, one per entity, and a
         command refused to some and not others would import half
]]
local kind, force = ARGV[1], ARGV[2]
local hash_ttl, items_ttl = rs_ttl(ARGV[3]), rs_ttl(ARGV[4])
local count = tonumber(ARGV[5])
if (kind ~= 'list' and kind ~= 'zset' and kind ~= 'set') or (force ~= '0' and force ~= '1')
    or not hash_ttl or not items_ttl or not count or count < 0 or count % 1 ~= 0
    or 5 + 2 * count > #ARGV then
  return redis.error_reply('RSARG malformed arguments to import_adk')
end
local first = 6 + 2 * count  -- the collection's first argument
local size = #ARGV - first + 1
if kind == 'zset' then
  if size % 2 ~= 0 then return redis.error_reply('RSARG malformed arguments to import_adk') end
  for i = first + 1, #ARGV, 2 do
    if not tonumber(ARGV[i]) then
      return redis.error_reply('RSARG malformed score to import_adk: ' .. ARGV[i])
    end
  end
end

local function same_hash()
  if redis.call('HLEN', KEYS[1]) ~= count then return false end
  for i = 6, first - 1, 2 do
    if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then return false end
  end
  return true
end

local function same_events()
  local stored = redis.call('LRANGE', KEYS[2], 0, -1)
  if #stored ~= size then return false end
  for i = 1, size do
    if stored[i] ~= ARGV[first + i - 1] then return false end
  end
  return true
end

-- The index merged: 1 if it gained a member, moved one up or lives longer. It lives at
-- least as long as the sessions it lists (adk_index.lua).
local function merge_index()
  if size == 0 then return 0 end
  local left = redis.call('PTTL', KEYS[2])  -- before: -2 absent, -1 no expiry
  local changed = 0
  for i = first, #ARGV, 1000 do
    local stop = math.min(i + 999, #ARGV)
    if kind == 'set' then
      changed = changed + redis.call('SADD', KEYS[2], unpack(ARGV, i, stop))
    else
      local args = {}
      for j = i, stop, 2 do
        args[#args + 1] = ARGV[j + 1]
        args[#args + 1] = ARGV[j]
      end
      changed = changed + redis.call('ZADD', KEYS[2], 'GT', 'CH', unpack(args))
    end
  end
  if items_ttl == 0 then
    if left >= 0 then
      redis.call('PERSIST', KEYS[2])
      changed = changed + 1
    end
  elseif left == -2 or (left >= 0 and left < items_ttl) then
    redis.call('PEXPIRE', KEYS[2], items_ttl)
  end
  return math.min(changed, 1)
end

local exists = redis.call('EXISTS', KEYS[1]) == 1
if kind == 'list' then exists = exists or redis.call('EXISTS', KEYS[2]) == 1 end
local same = same_hash() and (kind ~= 'list' or same_events())
if exists and not same and force == '0' then return {0, 0} end
local written = 0
if not same then
  redis.call('DEL', KEYS[1])
  if kind == 'list' then redis.call('DEL', KEYS[2]) end
  -- In slices of 500 pairs: Lua's unpack() is limited by its C stack.
  for i = 6, first - 1, 1000 do
    redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, first - 1)))
  end
  if count > 0 and hash_ttl > 0 then redis.call('PEXPIRE', KEYS[1], hash_ttl) end
  written = 1
end
if kind == 'list' then
  if not same then
    for i = first, #ARGV, 1000 do
      redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
    end
    if size > 0 and items_ttl > 0 then redis.call('PEXPIRE', KEYS[2], items_ttl) end
  end
elseif merge_index() == 1 then
  written = 1
end
return {1, written}
