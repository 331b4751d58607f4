--[[ graph_writes: store a task's pending writes for one checkpoint (put_writes).
KEYS[1..7] the thread's keys, see _graph.lua; KEYS[8] the lock key of the thread id
ARGV[1]  <m>: "<checkpoint_ns>\0<checkpoint_id>" the writes belong to
ARGV[2]  ttl in ms for every key of the thread ("0": no expiry set)
ARGV[3]  lease value "<token>,<fence>" the write is guarded by, or ""
ARGV     then triples: the write's field suffix "<task_path>\0<task_id>\0<idx>", "1"
         if it replaces one stored (LangGraph's special channels: error, interrupt...)
         else "0" (a regular write stored again is left as it was), the packed write
returns  how many writes were stored
errors   RSARG on malformed arguments, RSLOCKLOST if the lease no longer holds the
         lock. Both before any write.
unchecked get
]]
local ttl_ms = rs_ttl(ARGV[2])
if not string.find(ARGV[1], '\0', 1, true) or not ttl_ms or (#ARGV - 3) % 3 ~= 0 then
  return redis.error_reply('RSARG malformed arguments to graph_writes')
end
for i = 4, #ARGV, 3 do
  if ARGV[i + 1] ~= '0' and ARGV[i + 1] ~= '1' then
    return redis.error_reply('RSARG malformed arguments to graph_writes')
  end
end
local lost = rs_guard(KEYS[8], ARGV[3])
if lost then return lost end
local stored = 0
for i = 4, #ARGV, 3 do
  local field = ARGV[1] .. '\0' .. ARGV[i]
  if ARGV[i + 1] == '1' or redis.call('HEXISTS', KEYS[5], field) == 0 then
    redis.call('HSET', KEYS[5], field, ARGV[i + 2])
    redis.call('ZADD', KEYS[6], 0, field)
    stored = stored + 1
  end
end
rs_expire(ttl_ms)
return stored
