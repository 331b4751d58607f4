--[[ _envelope: helpers prepended to every record script (a library, not a script).
A record is one string value:
  "R1,<version:16 digits>,<expires_ms:13>,<updated_ms:13>,<schema:1-9 digits>,<write_id:1-32 [A-Za-z0-9_-]>\n<payload>"
or, after merges appended patches to it (record_merge), the same header with "M1" and
the payload as frames "<length>:<bytes>": the base, then each patch (redistate/mergelog.py).
The header is at most 91 bytes.
The first three fields have fixed widths so scripts read them with GETRANGE and patch
them in place with SETRANGE: scripts never parse, concatenate or re-encode the payload
(and never run it through cjson, which would corrupt user JSON).
Must accept exactly what redistate/envelope.py accepts.
]]
-- 0-based offsets for SETRANGE, as strings: redis.call formats a Lua number with %.17g
-- (multi-precision printf on glibc) on every call.
local RS_VERSION_AT = '3'
local RS_EXPIRES_AT = '20'
local RS_MAX_TTL_MS = 3153600000000  -- 100 years; keeps expiry stamps at 13 digits

local RS_MAX_VERSION = 9007199254740991  -- 2^53 - 1: exact in Lua's doubles
local RS_UNWRITTEN = 'R1,0000000000000000,0000000000000,0000000000000,'

-- Integers are formatted with %d where the C long holds 2^53 - 1 (every 64-bit build),
-- else with %.0f, which glibc runs through multi-precision arithmetic: several times
-- the cost, on every write. Decided on first use (a library's loading code may not
-- call string.*): once per library load as a function, once per call by EVALSHA.
local RS_INT, RS_D16, RS_D13, RS_FIELDS
local function rs_formats()
  local d = string.format('%d', RS_MAX_VERSION) == '9007199254740991'
  RS_INT = d and '%d' or '%.0f'
  RS_D16 = d and '%016d' or '%016.0f'  -- zero-padded to 16 digits
  RS_D13 = d and '%013d' or '%013.0f'
  RS_FIELDS = RS_D16 .. ',' .. RS_D13 .. ',' .. RS_D13
end

-- A header tail "<schema:1-9 digits>,<write_id:1-32 [A-Za-z0-9_-]>\n", checked whole.
local function rs_tail_ok(tail)
  local schema, wid = string.match(tail, '^(%d+),([%w_-]+)\n$')
  return schema ~= nil and #schema <= 9 and #wid <= 32
end

-- Parse a stored header: version, expires_ms, updated_ms, its tail (what identifies
-- one write) and whether patches follow ("M1"), or nil. One cheap pattern, then length
-- checks: this runs on every write.
local function rs_parse(head)
  local kind, ver, exp, upd, tail, schema, wid =
    string.match(head, '^([RM])1,(%d+),(%d+),(%d+),((%d+),([%w_-]+)\n)')
  if not ver or #ver ~= 16 or #exp ~= 13 or #upd ~= 13 or #schema > 9 or #wid > 32 then
    return nil
  end
  local version = tonumber(ver)
  -- Zero is never stored; 2^53 and beyond would be rounded by Lua's doubles.
  if version == 0 or version > RS_MAX_VERSION then return nil end
  return version, tonumber(exp), tonumber(upd), tail, kind == 'M'
end

-- Header fields of the record at key and whether it holds patches (multiple returns).
-- nil if absent; false if the key holds something that is not a record (WRONGTYPE is
-- raised by GETRANGE itself).
local function rs_head(key)
  local head = redis.call('GETRANGE', key, '0', '95')
  if head == '' then
    if redis.call('EXISTS', key) == 1 then return false end
    return nil
  end
  local ver, exp, upd, tail, log = rs_parse(head)
  if not ver then return false end
  return ver, exp, upd, tail, log
end

local function rs_foreign(key)
  return redis.error_reply('RSINTEGRITY value at ' .. key .. ' is not a redistate record')
end

-- A TTL argument: digits only, no leading zero, at most 100 years; nil if malformed.
-- Canonical, so that a script may pass the argument itself to PX or PEXPIRE (Redis
-- refuses a leading zero) instead of a number it would format on every call.
local function rs_ttl(arg)
  if arg ~= '0' and not string.match(arg, '^[1-9]%d*$') then return nil end
  local ttl = tonumber(arg)
  if ttl > RS_MAX_TTL_MS then return nil end
  return ttl
end

-- A guarded write may go ahead only while the lease's value is still the lock key's:
-- an expired or taken-over lease never writes (fencing, checked in the same step).
-- The reply names the holder's fence (or "free"), never a token: tokens release locks.
-- A lease renewed inline ("<token>,<fence>;<ttl_ms>", renew="inline") is extended to
-- its TTL by each guarded write that passes: a holder that writes keeps it, with no
-- thread, and a frozen one (a serverless function between invocations) loses it. Its
-- fence key lives as long (as lock_extend keeps it): "<ns>:fence:{name}", in the
-- lock's slot (the namespace holds no ':'). GT: a write queued before an extend to a
-- longer TTL never shortens the lease.
local function rs_guard(lock_key, lease)
  if lease == '' then return nil end
  local value, ttl = lease, nil
  local semi = string.find(lease, ';', 1, true)
  if semi then
    value, ttl = string.sub(lease, 1, semi - 1), string.sub(lease, semi + 1)
    if not rs_ttl(ttl) or ttl == '0' then
      return redis.error_reply('RSARG malformed lease ttl in ' .. lease)
    end
  end
  local current = redis.call('GET', lock_key)
  if current ~= value then
    local holder = 'free'
    if current then holder = string.match(current, ',(%d+)$') or 'other' end
    return redis.error_reply('RSLOCKLOST ' .. lock_key .. ' ' .. holder)
  end
  if ttl then
    redis.call('PEXPIRE', lock_key, ttl, 'GT')
    local at = string.find(lock_key, ':lock:{', 1, true)
    redis.call('PEXPIRE', string.sub(lock_key, 1, at) .. 'fence:' .. string.sub(lock_key, at + 6),
      ttl, 'GT')
  end
  return nil
end

-- The write id inside a header tail "<schema>,<write_id>\n" (checked by rs_tail_ok or
-- rs_parse): plain find and sub, no pattern.
local function rs_wid(tail)
  local comma = string.find(tail, ',', 1, true)
  return comma and string.sub(tail, comma + 1, -2)
end

-- A number as Redis must get it: plain digits (Lua would print 1.7e+15, losing digits).
local function rs_int(n)
  if not RS_INT then rs_formats() end
  return string.format(RS_INT, n)
end

-- An integer zero-padded to 16 or 13 digits (versions, sequence numbers; ms stamps).
local function rs_pad(n, width)
  if not RS_INT then rs_formats() end
  return string.format(width == 16 and RS_D16 or RS_D13, n)
end

-- A record header's fixed-width fields "<version:16>,<expires_ms:13>,<updated_ms:13>".
local function rs_fields(version, expires_ms, updated_ms)
  if not RS_INT then rs_formats() end
  return string.format(RS_FIELDS, version, expires_ms, updated_ms)
end

-- Remember, for memory_ms, that operation `id` is done with result `score` (a record's
-- version, or a time): a resend of it finds it here with ZSCORE and is not applied
-- again. Scores are never below the time of the write in µs (versions are
-- max(previous + 1, now)), so old entries are trimmed by score; one write in eight
-- trims (it is O(log n) either way), and the key expires when writes stop.
-- `first`: keep the score already there. For the id in a record's header as the record
-- is overwritten or deleted: a merge that patched an existing record left its own id
-- there (remembered with its own version) while later merges raised the version.
local function rs_remember(key, id, score, now_us, memory_ms, first)
  if first then
    redis.call('ZADD', key, 'NX', rs_int(score), id)
  else
    redis.call('ZADD', key, rs_int(score), id)
  end
  redis.call('PEXPIRE', key, rs_int(memory_ms))
  if now_us % 8 == 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. rs_int(now_us - memory_ms * 1000))
  end
end

-- The write memory's argument, "<memory_ms>[r][:<ack>]": how long (ms) ids are
-- remembered ("0": not at all); "r" when the client sends the call again after a
-- failure (only a resend looks itself up: a first send's id is new, so it cannot be
-- in the memory); ack: the id of one of this client's calls on this entity that has
-- returned (it is never sent again, so its entry can go and a write replacing it
-- need not remember it). Returns memory_ms, resend, ack ('' if none); nil if malformed.
local function rs_memory(arg)
  local ms, r, rest = string.match(arg, '^(%d+)(r?)(.*)$')
  if not ms then return nil end
  local ack = ''
  if rest ~= '' then
    ack = string.match(rest, '^:([%w_,-]+)$')
    if not ack or #ack > 64 then return nil end
  end
  local memory_ms = rs_ttl(ms)
  if not memory_ms then return nil end
  return memory_ms, r == 'r', ack
end

-- Drop the entry of the client's returned call `ack` (see rs_memory), if it has one.
local function rs_forget(key, ack)
  if ack ~= '' then redis.call('ZREM', key, ack) end
end

local function rs_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end


-- A resend recognised: note it again (a write, so replicated after the original one).
-- A WAIT behind the resend then covers the original write too: replication is one
-- ordered stream, and a resend that wrote nothing would leave WAIT nothing to wait for.
local function rs_resent(key, id, score, memory_ms)
  if memory_ms > 0 then
    local now_us = rs_now_us()
    rs_remember(key, id, score == 0 and now_us or score, now_us, memory_ms)
  end
end
