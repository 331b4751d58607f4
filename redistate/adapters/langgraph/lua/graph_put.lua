--[[ graph_put: store one LangGraph checkpoint of a thread (RedisStateSaver.put).
KEYS[1..7] the thread's keys, see _graph.lua; KEYS[8] the lock key of the thread id
ARGV[1]  <m>: "<checkpoint_ns>\0<checkpoint_id>"
ARGV[2]  the packed checkpoint (without channel values), metadata and parent id
ARGV[3]  the run id from the metadata, or ""
ARGV[4]  ttl in ms for every key of the thread ("0": no expiry set)
ARGV[5]  lease value "<token>,<fence>" the write is guarded by, or ""
ARGV[6]  keep: the most checkpoints per namespace ("0": all); the oldest go, unless the
         thread uses a DeltaChannel (its values are rebuilt from older checkpoints)
ARGV[7]  "1" if this checkpoint uses a DeltaChannel, else "0"
ARGV[8]  n: how many blob fields the checkpoint uses; ARGV[9 .. 8+n] those fields
ARGV     then pairs (blob field, packed value): the channel values new in this one
resent   -1
returns  how many old checkpoints the cap removed; -1: a checkpoint already stored (a
         resend whose reply was lost, found before the fence check) is left as the
         first send left it
errors   RSARG on malformed arguments, RSLOCKLOST if the lease no longer holds the
         lock. Both before any write.
unchecked get hexists
]]
local ttl_ms, keep, n = rs_ttl(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[8])
if not string.find(ARGV[1], '\0', 1, true) or not ttl_ms
    or not string.match(ARGV[6], '^%d+$') or (ARGV[7] ~= '0' and ARGV[7] ~= '1')
    or not string.match(ARGV[8], '^%d+$') or #ARGV < 8 + n or (#ARGV - 8 - n) % 2 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to graph_put')
end
local m = ARGV[1]
-- Stored already: this is a resend (checkpoint ids are unique), reported as made even if
-- the lease was lost since, like every guarded write redistate resends.
if redis.call('HEXISTS', KEYS[1], 'c|' .. m) == 1 then return -1 end
local lost = rs_guard(KEYS[8], ARGV[5])
if lost then return lost end

for i = 9 + n, #ARGV, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
local refs = {}
for i = 9, 8 + n do
  refs[#refs + 1] = ARGV[i]
  redis.call('HINCRBY', KEYS[4], ARGV[i], 1)
end
redis.call('HSET', KEYS[1], 'c|' .. m, ARGV[2], 'r|' .. m, table.concat(refs, '\1'),
  'u|' .. m, ARGV[3])
if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'delta', '1') end
redis.call('ZADD', KEYS[2], 0, m)
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[7], 0, ARGV[3] .. '\0' .. m) end

local removed = 0
if keep > 0 and redis.call('HGET', KEYS[1], 'delta') ~= '1' then
  local ns = string.sub(m, 1, string.find(m, '\0', 1, true))  -- "<ns>\0"
  local count = redis.call('ZLEXCOUNT', KEYS[2], '[' .. ns, '[' .. ns .. '\255')
  if count > keep then
    local old = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. ns, '[' .. ns .. '\255',
      'LIMIT', 0, count - keep)
    for _, victim in ipairs(old) do
      if victim ~= m then removed = removed + rs_remove(victim) end
    end
  end
  rs_drop_orphans(ns)
end
rs_expire(ttl_ms)
return removed
