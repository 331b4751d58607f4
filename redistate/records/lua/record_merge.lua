--[[ record_merge: append an RFC 7386 merge patch to a record in one step, without reading
or parsing its JSON: merges never conflict, so contending writers never retry.
KEYS[1]  record key
KEYS[2]  lock key of the record's id (read only when ARGV[5] is set)
KEYS[3]  the record's recent writes (see record_put; used only when ARGV[6] is not "0")
ARGV[1]  the patch as one frame, "<length>:<encoded patch>"
ARGV[2]  ttl in ms; "0" = no expiry
ARGV[3]  "1" = keep the record's TTL if it exists (ARGV[2] applies on create),
         "0" = set ARGV[2]
ARGV[4]  this merge's header tail "<schema>,<write_id>\n": the record's tail when the
         merge creates it or turns a plain record into a patched one
ARGV[5]  lease value "<token>,<fence>" the merge is guarded by, or "" (unguarded)
ARGV[6]  the write memory (rs_memory): how long (ms) write ids are remembered ("0" =
         nothing is remembered), whether this is a resend, and an ack
memory   KEYS[3] ARGV[6]
ARGV[7]  the most payload bytes the record may hold (frames included)
ARGV[8]  optional: "1" = reply {5, fields} instead of the value (the caller does not
         want the merged data: the reply stays small however large the record)
resent   3
returns  the stored value after the merge (header and frames): the caller folds it;
         {5, "<version>,<expires_ms>,<updated_ms>"}: appended, with ARGV[8] "1";
         {3, version, value}: a resend of a merge applied earlier with this version;
         nothing changed; value is the current one (absent: no third element);
         {4, bytes}: not appended, nothing changed: the payload would grow to bytes,
         over ARGV[7], or (bytes 0) the record is at another schema than ARGV[4]'s; the
         caller merges by compare-and-set instead (which folds, migrates and compacts).
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value
         (a bad header, or a patched record without even a base frame), RSLOCKLOST if
         the lease no longer holds the lock. All before any write. The stored frames
         are not read (that would make a merge O(record)): damage inside them is found
         by whoever folds them, the merging client included, after the append.
A plain record ("R1") becomes "M1" on its first merge: its payload turns into the base
frame, rewritten once; later merges APPEND a frame and patch the header in place, so the
write costs O(patch), not O(record) (the reply is the whole value: the caller folds it).
record_compact folds the frames back.
Every merge remembers its own id with its own version (only a merge that turns a plain
record into a patched one leaves its id in the header); versions as in record_put.
unchecked exists getrange zscore
]]
local patch, tail = ARGV[1], ARGV[4]
local ttl_ms = rs_ttl(ARGV[2])
local memory_ms, resend, ack = rs_memory(ARGV[6])
local digits, body_at = string.match(patch, '^(%d+):()')
local max_bytes = string.match(ARGV[7], '^%d+$') and tonumber(ARGV[7])
local brief = ARGV[8] or ''
if brief ~= '' and brief ~= '1' then
  return redis.error_reply('RSARG malformed arguments to record_merge')
end
if not digits or tonumber(digits) ~= #patch - body_at + 1 or not ttl_ms or not memory_ms
    or (ARGV[3] ~= '0' and ARGV[3] ~= '1') or not rs_tail_ok(tail) or not max_bytes then
  return redis.error_reply('RSARG malformed arguments to record_merge')
end

local wid = rs_wid(tail)
if memory_ms > 0 and resend then
  local seen = redis.call('ZSCORE', KEYS[3], wid)
  if seen then
    rs_resent(KEYS[3], wid, tonumber(seen), memory_ms)
    return {3, tonumber(seen), redis.call('GET', KEYS[1])}
  end
end
local version, exp, upd, current_tail, log = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
local lost = rs_guard(KEYS[2], ARGV[5])
if lost then return lost end
if version and string.match(current_tail, '^(%d+),') ~= string.match(tail, '^(%d+),') then
  -- Another schema: the patch cannot join its frames (the caller migrates by compare-and-set).
  return {4, 0}
end

local now_us = rs_now_us()
local now_ms = math.floor(now_us / 1000)
local new_version = math.max((version or 0) + 1, now_us)
if new_version > RS_MAX_VERSION then
  return redis.error_reply('RSINTEGRITY version of ' .. KEYS[1] .. ' would pass 2^53 - 1')
end
local keep = ARGV[3] == '1' and version
local expires_ms = 0
if keep then
  expires_ms = exp
elseif ttl_ms > 0 then
  expires_ms = now_ms + ttl_ms
end
local fields = rs_fields(new_version, expires_ms, now_ms)

local value
if log then
  -- The header is 48 bytes and the tail; the rest is frames, at least a base ("0:").
  local stored = redis.call('STRLEN', KEYS[1]) - 48 - #current_tail
  if stored < 2 then return rs_foreign(KEYS[1]) end
  local size = stored + #patch
  if size > max_bytes then return {4, size} end
  redis.call('APPEND', KEYS[1], patch)
  redis.call('SETRANGE', KEYS[1], RS_VERSION_AT, fields)
  if not keep then
    if ttl_ms > 0 then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
    else
      redis.call('PERSIST', KEYS[1])
    end
  end
  if brief == '' then value = redis.call('GET', KEYS[1]) end
else
  local base = ''
  if version then base = string.sub(redis.call('GET', KEYS[1]), 49 + #current_tail) end
  local size = #base + #tostring(#base) + 1 + #patch
  if size > max_bytes then return {4, size} end
  value = 'M1,' .. fields .. ',' .. tail .. #base .. ':' .. base .. patch
  if keep then
    redis.call('SET', KEYS[1], value, 'KEEPTTL')
  elseif ttl_ms > 0 then
    redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
  else
    redis.call('SET', KEYS[1], value)
  end
  if version and memory_ms > 0 and upd >= now_ms - memory_ms
      and rs_wid(current_tail) ~= ack then
    -- The plain record's write leaves the header: a resend of it must still be known.
    rs_remember(KEYS[3], rs_wid(current_tail), version, now_us, memory_ms, true)
  end
end
if memory_ms > 0 then
  rs_forget(KEYS[3], ack)
  rs_remember(KEYS[3], wid, new_version, now_us, memory_ms)
end
if brief == '1' then return {5, fields} end
return value
