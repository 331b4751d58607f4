--[[ _memory: helpers prepended to the LangGraph store scripts (a library, not a script;
redistate.langgraph.RedistateStore, redistate/adapters/langgraph/memory.py). A
namespace's keys, in its hash slot (the namespace, labels joined by "."):
KEYS[1] items, a hash: item key -> "<created_ms>:<updated_ms>:<ttl_ms>:<value>", the
        value encoded by the store's codec; ttl_ms "0": the item does not expire
KEYS[2] exp, a zset: the key of each item that expires -> when (ms, server time)
Both keys expire together when every item does, at the last item's expiry, so a
namespace whose items all expired is gone (EXISTS answers whether it has a live one).
]]

-- Server time in ms.
local function rs_mem_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether the item `key` (stored: `stored`) is live at `now`.
local function rs_mem_live(key, stored, now)
  if not stored then return false end
  local ttl = string.match(stored, '^%d+:%d+:(%d+):')
  if ttl == '0' then return true end
  local at = redis.call('ZSCORE', KEYS[2], key)
  return at ~= false and tonumber(at) > now
end

-- Up to `limit` expired items deleted (a bounded step: a backlog goes over calls).
local function rs_mem_purge(now, limit)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', rs_int(now), 'LIMIT', 0, limit)
  for i = 1, #gone, 1000 do
    local slice = {unpack(gone, i, math.min(i + 999, #gone))}
    redis.call('HDEL', KEYS[1], unpack(slice))
    redis.call('ZREM', KEYS[2], unpack(slice))
  end
  return #gone
end

-- The namespace's keys expire when its last item does; persist while one never expires.
local function rs_mem_expiry()
  local count = redis.call('HLEN', KEYS[1])
  if count == 0 then
    redis.call('DEL', KEYS[1], KEYS[2])
  elseif redis.call('ZCARD', KEYS[2]) == count then
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
    redis.call('PEXPIREAT', KEYS[1], last)
    redis.call('PEXPIREAT', KEYS[2], last)
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
  end
end
