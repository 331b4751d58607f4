--[[ claude_append: append a batch of Claude Agent SDK transcript entries (redistate.claude)
in one step: no other batch lands inside it, an entry whose uuid the transcript holds
is not stored again, the main transcript's summary is replaced by the one folded from
it (compare-and-set on its version), and the TTL is set with the write.
KEYS[1]  the session: a hash, "seq" -> entries stored so far, "v" -> the summary's
         version (max(previous + 1, now in µs): never one a deleted session of the same
         id had, so a fold from that one's summary never matches), "sum" -> the
         summary (encoded), "mtime" -> the main transcript's last write (ms)
KEYS[2]  its transcripts: a zset, every member at score 0; "<subpath>\0<seq:16><entry>"
         an entry, "<subpath>\1<uuid>" a stored uuid ("" is the main transcript)
KEYS[3]  its subpaths: a set
KEYS[4]  its recent writes (rs_memory)
ARGV[1]  the write memory (rs_memory): how long (ms) write ids are remembered, resend, ack
memory   KEYS[4] ARGV[1]
ARGV[2]  the write id ([A-Za-z0-9_-], 1-32 chars)
ARGV[3]  ttl in ms from now, set on every key of the session; "0" = leave it as it is
ARGV[4]  the subpath ("" = the main transcript; no byte below 0x20)
ARGV[5]  the summary version the fold started from (main transcript only: then nothing
         is written unless it is the stored one and no uuid of the batch is stored);
         "-" = no fold (a subpath, or n = 0: entries with a stored uuid are skipped)
ARGV[6]  the folded summary, encoded ("" with "-")
ARGV[7]  n, the number of entries (0-99999; 0: only the TTL is set, on the keys that
         exist: a batch whose entries are all stored)
ARGV[8 … 7+n]     each entry's uuid ("" = none: never skipped)
ARGV[8+n … 7+2n]  the entries, encoded, in order
resent   2
returns  {1, mtime, version}: appended (the main transcript's write time in ms, 0 for a
         subpath; the summary's version after); {2}: a resend of an append already made;
         {3, version, summary, uuid…}: nothing written, the summary moved on (its
         version and value as stored) or the batch holds the uuids listed
errors   RSARG on malformed arguments, before any write.
]]
local memory_ms, resend, ack = rs_memory(ARGV[1])
local ttl_ms = rs_ttl(ARGV[3])
local n = tonumber(string.match(ARGV[7], '^[1-9]%d?%d?%d?%d?$') or (ARGV[7] == '0' and '0') or '')
local sub, fold = ARGV[4], ARGV[5] ~= '-'
if not memory_ms or not ttl_ms or not string.match(ARGV[2], '^[%w_-]+$') or #ARGV[2] > 32
    or not n or #ARGV ~= 7 + 2 * n or string.find(sub, '[%z\1-\31]')
    or (fold and (sub ~= '' or n == 0 or not string.match(ARGV[5], '^%d+$') or #ARGV[5] > 16))
    or (not fold and ARGV[6] ~= '') then
  return redis.error_reply('RSARG malformed arguments to claude_append')
end
if memory_ms > 0 and resend and redis.call('ZSCORE', KEYS[4], ARGV[2]) then
  rs_resent(KEYS[4], ARGV[2], 0, memory_ms)
  return {2}
end
local version = 0
if fold then
  version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
  local moved = {3, version, redis.call('HGET', KEYS[1], 'sum') or ''}
  for i = 8, 7 + n do
    if ARGV[i] ~= '' and redis.call('ZSCORE', KEYS[2], sub .. '\1' .. ARGV[i]) then
      moved[#moved + 1] = ARGV[i]
    end
  end
  if version ~= tonumber(ARGV[5]) or #moved > 3 then return moved end
end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
if n == 0 then seq = nil end
for i = 1, n do
  local uuid = ARGV[7 + i]
  local mark = sub .. '\1' .. uuid
  if uuid == '' or not redis.call('ZSCORE', KEYS[2], mark) then
    seq = seq + 1
    redis.call('ZADD', KEYS[2], 0, sub .. '\0' .. rs_pad(seq, 16) .. ARGV[7 + n + i])
    if uuid ~= '' then redis.call('ZADD', KEYS[2], 0, mark) end
  end
end
local mtime = 0
if fold then
  local now_us = rs_now_us()
  -- Strictly later than the last write: two batches never share a time.
  mtime = math.max(math.floor(now_us / 1000), tonumber(redis.call('HGET', KEYS[1], 'mtime') or '0') + 1)
  version = math.max(version + 1, now_us)
  redis.call('HSET', KEYS[1], 'seq', rs_int(seq), 'v', rs_int(version), 'sum', ARGV[6],
    'mtime', rs_int(mtime))
elseif seq then
  redis.call('HSET', KEYS[1], 'seq', rs_int(seq))
  redis.call('SADD', KEYS[3], sub)
end
if ttl_ms > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  redis.call('PEXPIRE', KEYS[2], ttl_ms)
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('PEXPIRE', KEYS[3], ttl_ms)
  end
end
if memory_ms > 0 then
  local now_us = rs_now_us()
  rs_forget(KEYS[4], ack)
  rs_remember(KEYS[4], ARGV[2], now_us, now_us, memory_ms)
end
return {1, mtime, version}
