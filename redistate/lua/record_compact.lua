--[[ record_compact: replace the frames a client folded with their result, keeping any
frame appended since; the data and the version stay as they are.
KEYS[1]  record key
ARGV[1]  the header tail of the value that was folded: it names that value's generation
ARGV[2]  the length in bytes of the value that was folded (header included)
ARGV[3]  the folded state, encoded: the new base
ARGV[4]  the new header tail "<schema>,<write_id>\n" (a fresh id: a resent compaction
         finds the tail changed and does nothing)
returns  1 = compacted ("R1" again when nothing was appended since); 0 = nothing done:
         the record was replaced, deleted or compacted since the read
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value.
Merges only append to a patched record and every other write replaces it with a new
tail, so an unchanged tail and a length of at least ARGV[2] mean the first ARGV[2]
bytes are still the ones folded. Unguarded: it changes no data, so a stale owner's
compaction is harmless.
]]
local folded = string.match(ARGV[2], '^%d+$') and tonumber(ARGV[2])
if not folded or not rs_tail_ok(ARGV[1]) or not rs_tail_ok(ARGV[4]) then
  return redis.error_reply('RSARG malformed arguments to record_compact')
end
local version, exp, upd, tail, log = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if not log or tail ~= ARGV[1] then return 0 end
local size = redis.call('STRLEN', KEYS[1])
if size < folded then return 0 end
local fields = string.format('%016.0f,%013.0f,%013.0f', version, exp, upd)
local value
if size == folded then
  value = 'R1,' .. fields .. ',' .. ARGV[4] .. ARGV[3]
else
  value = 'M1,' .. fields .. ',' .. ARGV[4] .. #ARGV[3] .. ':' .. ARGV[3]
    .. redis.call('GETRANGE', KEYS[1], folded, -1)
end
redis.call('SET', KEYS[1], value, 'KEEPTTL')
return 1
