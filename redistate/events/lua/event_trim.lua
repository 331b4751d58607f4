--[[ event_trim: remove an entity's oldest events up to one the caller read and checked,
leaving an anchor the remaining chain continues from, in one step.
KEYS[1]  the entity's event stream
KEYS[2]  its anchor, a hash: seq and digest of the last event removed, its id, the state
         folded up to it (default reducer, encoded by the store's codec), the state's
         digest (bound to the chain digest), how many events were removed in all
ARGV[1]  the stream id of the last event to remove
ARGV[2]  its digest or seal (the caller verified the chain up to it)
ARGV[3]  its position in the chain
ARGV[4]  the state folded up to and including it, encoded
ARGV[5]  SHA-256 hex over ARGV[2] and ARGV[4] (computed by the client), or with
         signing keys a seal "<key id>:<HMAC hex>" over the stream key, ARGV[2] and ARGV[4]
flags    allow-oom
returns  the number of events removed (0 if that event is no longer there with that
         digest: trimmed meanwhile, or the stream was rebuilt)
errors   RSARG on malformed arguments. Before any write.
unchecked xrange xtrim
]]
local id_ms, id_seq = string.match(ARGV[1], '^(%d+)-(%d+)$')
if not id_ms or not rs_link_ok(ARGV[2]) or not string.match(ARGV[3], '^[1-9]%d*$')
    or not rs_link_ok(ARGV[5]) then
  return redis.error_reply('RSARG malformed arguments to event_trim')
end
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
if not found then return 0 end
local digest
for i = 1, #found[2], 2 do
  if found[2][i] == 'd' then digest = found[2][i + 1] end
end
if digest ~= ARGV[2] then return 0 end
-- MINID evicts ids below the threshold: the next possible id after the last removed.
local removed = redis.call('XTRIM', KEYS[1], 'MINID',
  id_ms .. '-' .. string.format('%.0f', tonumber(id_seq) + 1))
redis.call('HINCRBY', KEYS[2], 'removed', removed)
redis.call('HSET', KEYS[2], 'seq', ARGV[3], 'digest', ARGV[2], 'id', ARGV[1], 'state', ARGV[4],
  'state_digest', ARGV[5])
return removed
