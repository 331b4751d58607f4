--[[ graph_read: checkpoints of a thread with their channel values and pending writes,
newest first, in one step (get_tuple, list).
KEYS[1..7] the thread's keys, see _graph.lua
ARGV[1]  the upper end of the range of <m> (ZREVRANGEBYLEX syntax: "[x", "(x" or "+")
ARGV[2]  the lower end ("[x", "(x" or "-")
ARGV[3]  the most checkpoints to return (1-1000)
ARGV[4]  ttl in ms to restart on every key of the thread when a checkpoint is found
         (the saver's refresh_on_read); "0": a read leaves the expiry as it is
returns  one entry per checkpoint: {m, packed, blob fields, blob values (aligned, ""
         if gone), write fields, write values}
errors   RSARG on malformed arguments.
unchecked hget hmget zrangebylex zrevrangebylex
]]
local count, ttl_ms = tonumber(ARGV[3]), rs_ttl(ARGV[4] or '')
if not string.match(ARGV[3], '^%d+$') or count < 1 or count > 1000 or not ttl_ms then
  return redis.error_reply('RSARG malformed arguments to graph_read')
end
local out = {}
for _, m in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[2], ARGV[1], ARGV[2], 'LIMIT', 0, count)) do
  local entry = rs_read(m)
  if entry then out[#out + 1] = entry end
end
if #out > 0 then rs_expire(ttl_ms) end
return out
