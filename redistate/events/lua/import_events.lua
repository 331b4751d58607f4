--[[ import_events: restore one exported event stream and its trim anchor, with the
same stream ids, unless the store holds another chain for the entity.
KEYS[1]  the entity's event stream
KEYS[2]  its trim anchor, a hash (event_trim writes it)
ARGV[1]  ttl in ms for both keys; "0" = no expiry
ARGV[2]  "1" = replace a different stored stream and anchor (--force), "0" = refuse
ARGV[3]  number of anchor field/value pairs, a (0: no anchor; at most 6)
ARGV[4 .. 3+2a]  the anchor's fields and values, stored as is (one of them "id")
ARGV[4+2a ..]    the events, oldest first, in groups of 8: stream id ("<ms>-<seq>",
         ascending), n, t, s, at, p, prev, d (the caller verified the chain)
returns  {1, count}: written, count events; {1, 0}: the stored stream already ends
         with the file's last id (the same events, nothing changed: a re-import);
         {0, last}: refused, the store ends elsewhere (`last` its last id; unchanged)
errors   RSARG on malformed arguments (ids not ascending...), before any write.
The last id is the last event's, or the anchor's when every event was trimmed: the
stream is then created empty, its last id the anchor's, as a trim leaves it (appends
continue after it).
acl      every command checked: an import is many calls, one per item, and a
         command refused to some items and not others would import half
]]
local ttl_ms = rs_ttl(ARGV[1])
local pairs_n = tonumber(ARGV[3])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1') or not string.match(ARGV[3], '^%d$')
    or pairs_n > 6 or 3 + 2 * pairs_n > #ARGV or (#ARGV - 3 - 2 * pairs_n) % 8 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to import_events')
end
local first = 4 + 2 * pairs_n
local anchor_id
for i = 4, first - 1, 2 do
  if ARGV[i] == 'id' then anchor_id = ARGV[i + 1] end
end
-- A stream id as two numbers (each at most 15 digits: exact), or nil.
local function parsed(id)
  local ms, seq = string.match(id or '', '^(%d+)%-(%d+)$')
  if not ms or #ms > 15 or #seq > 15 then return nil end
  return tonumber(ms), tonumber(seq)
end
local last_ms, last_seq = -1, -1
if anchor_id then
  last_ms, last_seq = parsed(anchor_id)
  if not last_ms then return redis.error_reply('RSARG malformed anchor id to import_events') end
end
for i = first, #ARGV, 8 do
  local ms, seq = parsed(ARGV[i])
  if not ms or ms < last_ms or (ms == last_ms and seq <= last_seq) or (ms == 0 and seq == 0) then
    return redis.error_reply('RSARG stream ids not ascending in import_events: ' .. ARGV[i])
  end
  last_ms, last_seq = ms, seq
end
local last = #ARGV >= first and ARGV[#ARGV - 7] or anchor_id
if not last then return redis.error_reply('RSARG no events and no anchor to import_events') end

local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
local stored = newest and newest[1] or redis.call('HGET', KEYS[2], 'id')
local exists = redis.call('EXISTS', KEYS[1]) + redis.call('EXISTS', KEYS[2])
if exists > 0 then
  if stored == last then return {1, 0} end
  if ARGV[2] == '0' then return {0, stored or ''} end
  redis.call('DEL', KEYS[1], KEYS[2])
end

for i = 4, first - 1, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
for i = first, #ARGV, 8 do
  redis.call('XADD', KEYS[1], ARGV[i], 'n', ARGV[i + 1], 't', ARGV[i + 2], 's', ARGV[i + 3],
    'at', ARGV[i + 4], 'p', ARGV[i + 5], 'prev', ARGV[i + 6], 'd', ARGV[i + 7])
end
if #ARGV < first then  -- all trimmed: an empty stream whose last id is the anchor's
  redis.call('XADD', KEYS[1], anchor_id, 'n', '0')
  redis.call('XDEL', KEYS[1], anchor_id)
end
if ttl_ms > 0 then
  for i = 1, 2 do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
return {1, (#ARGV - first + 1) / 8}
