--[[ record_put: write a versioned record; optional compare-and-set; TTL in the same step.
KEYS[1]  record key
KEYS[2]  lock key of the record's id (read only when ARGV[6] is set)
KEYS[3]  the record's recent writes: ids of writes since overwritten or deleted, scored by
         the version each produced (used only when ARGV[7] is not "0")
ARGV[1]  expected version: "" = any, "0" = only if absent, "N" = only if the current version is N
ARGV[2]  ttl in ms; "0" = no expiry
ARGV[3]  the new value, built by the client with zeroed version/expires/updated fields:
         "R1,0000000000000000,0000000000000,0000000000000,<schema>,<write_id>\n<payload>"
ARGV[4]  the header tail inside ARGV[3], "<schema>,<write_id>\n"; a stored record
         with the same tail is this very write, already applied (a resend)
ARGV[5]  "1" = keep the record's current TTL if it exists (ARGV[2] applies on create),
         "0" = set ARGV[2]
ARGV[6]  lease value "<token>,<fence>" the write is guarded by, or "" (unguarded)
ARGV[7]  the write memory (rs_memory): how long (ms) a write id is remembered once its
         write is overwritten (the longest a resend can come after the write; "0" =
         nothing is remembered), whether this is a resend, and an ack
memory   KEYS[3] ARGV[7]
resent   2 3
returns  written: the stored fields "<version>,<expires_ms>,<updated_ms>" as one string
         (cheaper to return than a table: this is the hot path);
         {2, version, expires_ms, updated_ms}: the current value is this very write (a
         resend of a write already applied); nothing changed;
         {3, version, expires_ms, 0}: this write was applied earlier with this version and
         has been overwritten, deleted or has expired since (a late resend); nothing
         changed; expires_ms is the current record's (0 if none);
         {0, version, 0, 0}: conflict, version is the current one (0 if absent).
errors   RSARG on malformed arguments, RSINTEGRITY if the key holds a foreign value,
         RSLOCKLOST if the lease no longer holds the lock. All before any write.
A resend is recognised before the lease is checked: a write applied while the lease
held is reported as applied even if the lease has expired since.
Versions are max(previous + 1, server time in µs): strictly increasing per key and,
as long as the server clock does not step back, never repeated after delete and
re-create, without keeping anything extra.
unchecked exists get getrange time zscore
]]
local expected = ARGV[1]
local ttl_ms = rs_ttl(ARGV[2])
local tail = ARGV[4]
local memory_ms, resend, ack = rs_memory(ARGV[7])
if (expected ~= '' and not string.match(expected, '^%d+$')) or not ttl_ms or not memory_ms
    or (ARGV[5] ~= '0' and ARGV[5] ~= '1')
    or not rs_tail_ok(tail) or string.sub(ARGV[3], 1, 48 + #tail) ~= RS_UNWRITTEN .. tail then
  return redis.error_reply('RSARG malformed arguments to record_put')
end

local version, exp, upd, current_tail, log = rs_head(KEYS[1])
if version == false then return rs_foreign(KEYS[1]) end
if version and current_tail == tail then
  rs_resent(KEYS[3], rs_wid(tail), version, memory_ms)
  return {2, version, exp, upd}
end
local now_us = rs_now_us()
local now_ms = math.floor(now_us / 1000)
-- Only a write made within the memory can be in it; and if the current record is older
-- than that, no write of the last memory_ms was overwritten (skip the lookup).
local recent = memory_ms > 0 and (not version or upd >= now_ms - memory_ms)
if recent and resend then
  local seen = redis.call('ZSCORE', KEYS[3], rs_wid(tail))
  if seen then
    rs_resent(KEYS[3], rs_wid(tail), tonumber(seen), memory_ms)
    return {3, tonumber(seen), exp or 0, 0}
  end
end
local lost = rs_guard(KEYS[2], ARGV[6])
if lost then return lost end
if not version then version = 0 end
if expected ~= '' and tonumber(expected) ~= version then
  return {0, version, 0, 0}
end

local new_version = math.max(version + 1, now_us)
if new_version > RS_MAX_VERSION then
  return redis.error_reply('RSINTEGRITY version of ' .. KEYS[1] .. ' would pass 2^53 - 1')
end
local expires_ms = 0
if ARGV[5] == '1' and version > 0 then
  expires_ms = exp
  redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
elseif ttl_ms > 0 then
  expires_ms = now_ms + ttl_ms
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[3])
end
local fields = rs_fields(new_version, expires_ms, now_ms)
redis.call('SETRANGE', KEYS[1], RS_VERSION_AT, fields)
if memory_ms > 0 and ack ~= '' then
  local replaced = version > 0 and rs_wid(current_tail)
  -- The acked write replaced here never remembered itself (no patches, no short
  -- TTL): nothing to forget. Else its entry, if any, goes.
  if replaced ~= ack or log or (exp > 0 and exp - upd < memory_ms) then
    rs_forget(KEYS[3], ack)
  end
end
if recent and version > 0 and not log and rs_wid(current_tail) ~= ack then
  -- The write replaced here may still be resent: remember it (an acked one cannot be;
  -- a patched record's id is a merge's, which remembered itself).
  rs_remember(KEYS[3], rs_wid(current_tail), version, now_us, memory_ms, true)
end
if memory_ms > 0 and expires_ms > 0 and expires_ms - now_ms < memory_ms then
  -- This record may expire before a resend of this write arrives: remember it now.
  rs_remember(KEYS[3], rs_wid(tail), new_version, now_us, memory_ms)
end
return fields
