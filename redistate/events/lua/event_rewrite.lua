--[[ event_rewrite: replace an entity's event stream with the same events re-encoded
(rotate-keys) or migrated (redistate migrate), re-chained by the caller, in two phases:
pages of the new chain are added to a staging stream, then one call swaps it in, only
if the stream still ends where the caller read it (else the staging stream goes).
KEYS[1]  the entity's event stream
KEYS[2]  the staging stream (same hash slot; expires in an hour if left behind)
KEYS[3]  the stream's anchor (a hash; rewritten only when ARGV[6] is not "")
ARGV[1]  "add" or "swap"
add:     ARGV[2] "1" for the first page (the staging stream starts empty) else "0";
         then groups of 8: stream id, n, t, s, at, p, prev, d. An entry whose id is not
         past the staging stream's end is skipped (a resent page adds nothing twice).
         returns the staging stream's length
swap:    ARGV[2] the stream id of the last event read, ARGV[3] its digest, ARGV[4] how
         many events were read ("0": none, and none may be there now; ARGV[2], ARGV[3]
         and ARGV[5] are then ignored), ARGV[5] the new chain's last digest, ARGV[6] the
         anchor's new state ("" = keep it), ARGV[7] its state digest
         returns 1: swapped (also when a resent swap finds it done); 0: the stream
         changed meanwhile (an append or a trim): nothing replaced, staging deleted
errors   RSARG on malformed arguments. Before any write.
acl      every command checked: the pages added first must be refused what the swap
         needs, or a denied swap leaves them staged (one operation, many calls)
]]
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return nil
end

if ARGV[1] == 'add' then
  if (ARGV[2] ~= '0' and ARGV[2] ~= '1') or (#ARGV - 2) % 8 ~= 0 then
    return redis.error_reply('RSARG malformed arguments to event_rewrite')
  end
  for i = 3, #ARGV, 8 do
    if not string.match(ARGV[i], '^%d+%-%d+$') then
      return redis.error_reply('RSARG malformed arguments to event_rewrite')
    end
  end
  if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
  local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
  local function after(id)
    if not last then return true end
    local a_ms, a_seq = string.match(id, '^(%d+)%-(%d+)$')
    local b_ms, b_seq = string.match(last[1], '^(%d+)%-(%d+)$')
    a_ms, b_ms = tonumber(a_ms), tonumber(b_ms)
    return a_ms > b_ms or (a_ms == b_ms and tonumber(a_seq) > tonumber(b_seq))
  end
  for i = 3, #ARGV, 8 do
    if after(ARGV[i]) then
      redis.call('XADD', KEYS[2], ARGV[i], 'n', ARGV[i + 1], 't', ARGV[i + 2],
        's', ARGV[i + 3], 'at', ARGV[i + 4], 'p', ARGV[i + 5], 'prev', ARGV[i + 6],
        'd', ARGV[i + 7])
    end
  end
  redis.call('PEXPIRE', KEYS[2], 3600000)
  return redis.call('XLEN', KEYS[2])
end

if ARGV[1] ~= 'swap' or #ARGV ~= 7 or not string.match(ARGV[4], '^%d+$') then
  return redis.error_reply('RSARG malformed arguments to event_rewrite')
end
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if ARGV[4] == '0' then  -- every event trimmed: only the anchor's state is rewritten
  if newest or ARGV[6] == '' then return 0 end
  redis.call('HSET', KEYS[3], 'state', ARGV[6], 'state_digest', ARGV[7])
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  -- Nothing staged: done by this very swap (its reply was lost), or never staged.
  if newest and field(newest[2], 'd') == ARGV[5] then return 1 end
  return 0
end
if not newest or newest[1] ~= ARGV[2] or field(newest[2], 'd') ~= ARGV[3]
    or redis.call('XLEN', KEYS[1]) ~= tonumber(ARGV[4])
    or redis.call('XLEN', KEYS[2]) ~= tonumber(ARGV[4]) then
  redis.call('DEL', KEYS[2])
  return 0
end
local pttl = redis.call('PTTL', KEYS[1])
redis.call('RENAME', KEYS[2], KEYS[1])
if pttl > 0 then
  redis.call('PEXPIRE', KEYS[1], pttl)
else
  redis.call('PERSIST', KEYS[1])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[3], 'state', ARGV[6], 'state_digest', ARGV[7])
end
return 1
