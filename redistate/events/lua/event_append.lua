--[[ event_append: add one event to an entity's hash chain, only if the chain still ends
where the caller computed from (a compare-and-set on the last digest): concurrent
appenders never fork it; the one that lost gets the chain's end and tries again.
KEYS[1]  the entity's event stream
KEYS[2]  its anchor, a hash (seq, digest): where a trimmed chain continues (read when
         the stream is empty)
KEYS[3]  lock key of the entity's id (read only when ARGV[8] is set)
KEYS[4]  the stream's recent writes (used only when ARGV[10] is not "0")
ARGV[1]  the digest the caller believes ends the chain ("" = an empty chain)
ARGV[2]  this event's position in the chain: the end's position + 1
ARGV[3]  type ([A-Za-z0-9_.:-], 1-64 chars)
ARGV[4]  schema (digits)
ARGV[5]  at: the appender's clock, ms since the epoch
ARGV[6]  payload, encoded by the store's codec
ARGV[7]  this event's digest, SHA-256 hex over ARGV[1..6] in canonical form (computed
         by the client: Redis Lua has no SHA-256; verify() recomputes every one), or
         with signing keys a seal "<key id>:<HMAC-SHA-256 hex>" (ARGV[1] may be either)
ARGV[8]  lease value "<token>,<fence>" the append is guarded by, or ""
ARGV[9]  the append's write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[10] the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered), whether this is a resend, and an ack
memory   KEYS[4] ARGV[10]
resent   2
returns  {1, id}: appended, `id` the stream id (server time);
         {0, digest, seq}: the chain ends elsewhere ("" and 0 when empty); nothing written;
         {2, id}: a resend of an append already made; `id` is "" if no longer among the
         newest 64 events
errors   RSARG on malformed arguments, RSLOCKLOST if the lease no longer holds the lock,
         RSINTEGRITY if the newest event has no position or digest. All before any write.
unchecked get zscore
]]
local memory_ms, resend, ack = rs_memory(ARGV[10])
if (ARGV[1] ~= '' and not rs_link_ok(ARGV[1]))
    or not string.match(ARGV[2], '^[1-9]%d*$') or not string.match(ARGV[3], '^[%w_.:-]+$')
    or #ARGV[3] > 64 or not string.match(ARGV[4], '^%d+$') or not string.match(ARGV[5], '^%d+$')
    or not rs_link_ok(ARGV[7]) or not string.match(ARGV[9], '^[%w_-]+$')
    or #ARGV[9] > 32 or not memory_ms then
  return redis.error_reply('RSARG malformed arguments to event_append')
end

-- The value of field `name` in a stream entry's flat field list, or nil.
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end

if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[4], ARGV[9]) then
  for _, entry in ipairs(redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', '64')) do
    if field(entry[2], 'd') == ARGV[7] then return {2, entry[1]} end
  end
  return {2, ''}
end
local lost = rs_guard(KEYS[3], ARGV[8])
if lost then return lost end

local end_digest, end_seq
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', '1')[1]
if last then
  end_digest, end_seq = field(last[2], 'd'), tonumber(field(last[2], 'n') or '')
  if not end_digest or not end_seq then
    return redis.error_reply('RSINTEGRITY event ' .. last[1] .. ' of ' .. KEYS[1]
      .. ' has no position or digest')
  end
else
  local anchor = redis.call('HMGET', KEYS[2], 'seq', 'digest')
  end_seq, end_digest = tonumber(anchor[1] or '0') or 0, anchor[2] or ''
end
if end_digest ~= ARGV[1] or end_seq + 1 ~= tonumber(ARGV[2]) then
  return {0, end_digest, end_seq}
end
local id = redis.call('XADD', KEYS[1], '*', 'n', ARGV[2], 't', ARGV[3], 's', ARGV[4],
  'at', ARGV[5], 'p', ARGV[6], 'prev', ARGV[1], 'd', ARGV[7])
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[4], ack)
  rs_remember(KEYS[4], ARGV[9], now_us, now_us, memory_ms)
end
return {1, id}
