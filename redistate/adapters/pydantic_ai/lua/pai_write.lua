--[[ pai_write: save a Pydantic AI conversation's record with the entries its history
adds (redistate.pydantic_ai), only if the stored record is at the revision the save
read: on a conflict nothing is written.
KEYS[1]  the record: a hash (rev, body, upd, scope; title, meta and dver are
         pai_details' and are kept)
KEYS[2]  the entries: a hash, entry id -> encoded entry
KEYS[3]  the parents: a hash, entry id -> the id of the entry before it ("" for none)
ARGV[1]  the revision the save read ("": the conversation must not exist)
ARGV[2]  the new revision (unique: a resend finds it stored, and writes nothing)
ARGV[3]  the record's body, encoded
ARGV[4]  when it was saved (ms), as listings order it
ARGV[5]  "-": no scope, or "=" and the scope
ARGV[6]  the head entry's id ("": no history): it must be stored or be one of the new
ARGV[7]  ttl in ms ("0": no expiry), set on the three keys
ARGV[8]  n, then n triples: an entry's id, its parent's id ("" for none), the entry
resent   2
returns  {1} written; {2} a resend of a save already made; {3, upd} the stored
         revision is another (upd: its save time, "0" for no record); {4, upd} the
         head is neither stored nor new
errors   RSARG on malformed arguments, before any write.
unchecked hget hexists
]]
local ttl_ms = rs_ttl(ARGV[7])
local n = tonumber(ARGV[8])
if not ttl_ms or not n or #ARGV ~= 8 + 3 * n or ARGV[2] == '' then
  return redis.error_reply('RSARG malformed arguments to pai_write')
end
local stored = redis.call('HGET', KEYS[1], 'rev')
if stored == ARGV[2] then
  return {2}
end
if (stored or '') ~= ARGV[1] then
  return {3, redis.call('HGET', KEYS[1], 'upd') or '0'}
end
local head = ARGV[6]
if head ~= '' and redis.call('HEXISTS', KEYS[3], head) == 0 then
  local new = false
  for i = 9, #ARGV, 3 do
    if ARGV[i] == head then new = true break end
  end
  if not new then
    return {4, redis.call('HGET', KEYS[1], 'upd') or '0'}
  end
end
for i = 9, #ARGV, 3 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'body', ARGV[3], 'upd', ARGV[4])
if ARGV[5] == '-' then
  redis.call('HDEL', KEYS[1], 'scope')
else
  redis.call('HSET', KEYS[1], 'scope', string.sub(ARGV[5], 2))
end
for k = 1, 3 do
  if ttl_ms == 0 then
    redis.call('PERSIST', KEYS[k])
  else
    redis.call('PEXPIRE', KEYS[k], rs_int(ttl_ms))
  end
end
return {1}
