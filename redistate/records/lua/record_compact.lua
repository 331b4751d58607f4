--[[ record_compact: replace a record's stored payload with an equivalent one, keeping the
data and the version: fold a patched record's frames (keeping any frame appended since),
or re-encode a plain record (rotate-keys re-encrypts with it).
KEYS[1]  record key
KEYS[2]  the record's recent writes (see record_put; used only when ARGV[5] is not "0")
ARGV[1]  the header tail of the value that was read: it names that value's generation
ARGV[2]  the length in bytes of the value that was read (header included)
ARGV[3]  the new payload: the folded state, encoded
ARGV[4]  the new header tail "<schema>,<write_id>\n" (an id other than ARGV[1]'s: a
         resent call finds the tail changed and does nothing)
ARGV[5]  the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered): the id leaving the header is remembered (as by
         record_put), so its resend is known; never a resend (nothing is looked up)
memory   KEYS[2] ARGV[5]
resent   never
returns  1 = rewritten ("R1" again when nothing was appended since); 0 = nothing done:
         the record was replaced, deleted, compacted or (plain) changed since the read
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value.
Merges only append to a patched record and every other write replaces it with a new
tail, so an unchanged tail and a length of at least ARGV[2] mean the first ARGV[2]
bytes are still the ones read; a plain record must have exactly that length. A touch in
between is kept: the header's fields are taken from the record as it is now.
Unguarded: it changes no data, so a stale owner's call is harmless.
unchecked exists getrange set strlen
]]
local folded = string.match(ARGV[2], '^%d+$') and tonumber(ARGV[2])
local memory_ms, _, ack = rs_memory(ARGV[5])
if not folded or not memory_ms or not rs_tail_ok(ARGV[1]) or not rs_tail_ok(ARGV[4]) then
  return redis.error_reply('RSARG malformed arguments to record_compact')
end
local version, exp, upd, tail, log = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if not version or tail ~= ARGV[1] then return 0 end
local size = redis.call('STRLEN', KEYS[1])
if size < folded or (not log and size ~= folded) then return 0 end
local fields = rs_fields(version, exp, upd)
local value
if size == folded then
  value = 'R1,' .. fields .. ',' .. ARGV[4] .. ARGV[3]
else
  value = 'M1,' .. fields .. ',' .. ARGV[4] .. #ARGV[3] .. ':' .. ARGV[3]
    .. redis.call('GETRANGE', KEYS[1], folded, -1)
end
redis.call('SET', KEYS[1], value, 'KEEPTTL')
if memory_ms > 0 then
  local now_us = rs_now_us()
  -- (A patched record's id is a merge's, which remembered itself.)
  if upd >= math.floor(now_us / 1000) - memory_ms and not log and rs_wid(tail) ~= ack then
    rs_remember(KEYS[2], rs_wid(tail), version, now_us, memory_ms, true)
  end
end
return 1
