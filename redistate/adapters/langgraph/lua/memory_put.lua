--[[ memory_put: put and delete items of one namespace of the LangGraph store
(RedistateStore), in one step, the TTL set with the write.
KEYS[1..2] the namespace's items and exp, see _memory.lua
KEYS[3]  tomb: the registry generation a sweep saw when it found the namespace empty
KEYS[4]  its recent writes: ids of puts made in the last ARGV[1] ms, scored by time in µs
KEYS[5]  the lock key of the namespace's id (a lease named like the namespace)
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered), whether this is a resend, and an ack
memory   KEYS[4] ARGV[1]
ARGV[2]  the put's write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[3]  the generation the registry gave this namespace when the caller announced it
         ("0": not announced); see memory_announce.lua
ARGV[4]  lease value "<token>,<fence>" the write is guarded by, or ""
ARGV[5…] triples: item key, ttl in ms ("0": none; "del": delete the item), value ("" for
         a delete). A later triple for the same key wins.
resent   2
returns  {1, now_ms, created}: written, created "1" if the namespace had no item before
         (the caller announces it again: a sweep that forgot it between the
         announcement and this put has finished, and left no tomb to refuse it);
         {2}: a resend of a put already made, nothing written;
         {0}: the namespace has no item and this put creates one: announce it to the
         registry first (or again: a sweep may be forgetting it) and resend with the
         generation. Nothing is written then.
errors   RSARG on malformed arguments, RSLOCKLOST if the lease no longer holds the
         lock; WRONGTYPE if a key holds something else. All before any write.
]]
local memory_ms, resend, ack = rs_memory(ARGV[1])
if not memory_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32
    or not string.match(ARGV[3], '^%d+$') or #ARGV[3] > 15
    or #ARGV < 7 or (#ARGV - 4) % 3 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to memory_put')
end
local creates, created = false, 0
for i = 5, #ARGV, 3 do
  local ttl = ARGV[i + 1]
  if ttl ~= 'del' then
    if not rs_ttl(ttl) then return redis.error_reply('RSARG malformed arguments to memory_put') end
    creates = true
  end
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[4], ARGV[2]) then
  rs_resent(KEYS[4], ARGV[2], 0, memory_ms)
  return {2}
end
local lost = rs_guard(KEYS[5], ARGV[4])
if lost then return lost end
if creates and redis.call('EXISTS', KEYS[1]) == 0 then
  -- A new namespace must be in the registry before its first item, and not only in
  -- the generation a sweep saw empty (that sweep may be forgetting it right now).
  local gen = tonumber(ARGV[3])
  local tomb = redis.call('GET', KEYS[3])
  if gen == 0 or (tomb and tonumber(tomb) >= gen) then return {0} end
  if tomb then redis.call('DEL', KEYS[3]) end
  created = 1
end
local now = rs_mem_now()
local stamp = rs_int(now)
for i = 5, #ARGV, 3 do
  local key, ttl = ARGV[i], ARGV[i + 1]
  if ttl == 'del' then
    redis.call('HDEL', KEYS[1], key)
    redis.call('ZREM', KEYS[2], key)
  else
    local created = stamp
    local old = redis.call('HGET', KEYS[1], key)
    if rs_mem_live(key, old, now) then created = string.match(old, '^(%d+):') end
    redis.call('HSET', KEYS[1], key, created .. ':' .. stamp .. ':' .. ttl .. ':' .. ARGV[i + 2])
    if ttl == '0' then
      redis.call('ZREM', KEYS[2], key)
    else
      redis.call('ZADD', KEYS[2], rs_int(now + tonumber(ttl)), key)
    end
  end
end
rs_mem_purge(now, 100)
rs_mem_expiry()
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[4], ack)
  rs_remember(KEYS[4], ARGV[2], now_us, now_us, memory_ms)
end
return {1, now, created}
