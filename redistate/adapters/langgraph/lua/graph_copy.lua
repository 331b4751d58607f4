--[[ graph_copy: the two halves of copying a thread (copy_thread); the threads are in
different hash slots, so the client carries the data from one to the other.
KEYS[1..7] the thread's keys, see _graph.lua
ARGV[1]  "dump": returns {cp hash, blobs hash, writes hash} as flat field/value lists
         "load": ARGV[2] ttl in ms ("0": none), ARGV[3] how many cp pairs follow,
         ARGV[4] how many blobs pairs follow them, then the writes pairs: the source's
         dump; checkpoints the target does not have are added with their blobs and
         writes; returns how many were added
errors   RSARG on malformed arguments. Before any write.
unchecked hgetall
]]
if ARGV[1] == 'dump' then
  return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[3]),
    redis.call('HGETALL', KEYS[5])}
end
local ttl_ms = rs_ttl(ARGV[2] or '')
if ARGV[1] ~= 'load' or not ttl_ms or not string.match(ARGV[3] or '', '^%d+$')
    or not string.match(ARGV[4] or '', '^%d+$')
    or (#ARGV - 4) % 2 ~= 0 or 4 + 2 * (ARGV[3] + ARGV[4]) > #ARGV then
  return redis.error_reply('RSARG malformed arguments to graph_copy')
end
local cp_end = 4 + 2 * tonumber(ARGV[3])
local blobs_end = cp_end + 2 * tonumber(ARGV[4])
local cp, blobs = {}, {}
for i = 5, cp_end, 2 do cp[ARGV[i]] = ARGV[i + 1] end
for i = cp_end + 1, blobs_end, 2 do blobs[ARGV[i]] = ARGV[i + 1] end
local added, new = 0, {}
for field, packed in pairs(cp) do
  local m = string.match(field, '^c|(.*)$')
  if m and redis.call('HEXISTS', KEYS[1], field) == 0 then
    local refs = cp['r|' .. m] or ''
    for _, ref in ipairs(rs_split(refs, '\1')) do
      if blobs[ref] then redis.call('HSETNX', KEYS[3], ref, blobs[ref]) end
      redis.call('HINCRBY', KEYS[4], ref, 1)
    end
    local run = cp['u|' .. m] or ''
    redis.call('HSET', KEYS[1], field, packed, 'r|' .. m, refs, 'u|' .. m, run)
    redis.call('ZADD', KEYS[2], 0, m)
    if run ~= '' then redis.call('ZADD', KEYS[7], 0, run .. '\0' .. m) end
    new[m] = true
    added = added + 1
  end
end
if cp['delta'] == '1' then redis.call('HSET', KEYS[1], 'delta', '1') end
for i = blobs_end + 1, #ARGV, 2 do
  local w = ARGV[i]
  local a = string.find(w, '\0', 1, true)
  local b = a and string.find(w, '\0', a + 1, true)
  local m = b and string.sub(w, 1, b - 1)  -- "<ns>\0<checkpoint_id>"
  if m and new[m] and redis.call('HSETNX', KEYS[5], w, ARGV[i + 1]) == 1 then
    redis.call('ZADD', KEYS[6], 0, w)
  end
end
rs_expire(ttl_ms)
return added
