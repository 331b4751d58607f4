--[[ _lock: taking a lease (a library, prepended to lock_acquire and
lock_acquire_reading, whose headers say what KEYS[1..3], ARGV[1..2] and the reply are).
]]
-- Take the lease on KEYS[1] (fence key KEYS[2], wake-up list KEYS[3]) for `token`, for
-- `ttl_arg` ms (a TTL argument, see rs_ttl): lock_acquire's reply, or an error reply.
local function rs_lock_acquire(token, ttl_arg)
  local ttl_ms = rs_ttl(ttl_arg)
  if not string.match(token, '^%x+$') or #token ~= 32 or not ttl_ms or ttl_ms == 0 then
    return redis.error_reply('RSARG malformed arguments to lock_acquire')
  end
  local current = redis.call('GET', KEYS[1])
  if current then
    local holder, fence = string.match(current, '^(%x+),(%d+)$')
    if holder == token then return {1, tonumber(fence), redis.call('PTTL', KEYS[1])} end
    return {0, redis.call('PTTL', KEYS[1])}
  end
  local last = redis.call('GET', KEYS[2]) or '0'
  if not string.match(last, '^%d+$') or #last > 16 or tonumber(last) >= RS_MAX_VERSION then
    return redis.error_reply('RSINTEGRITY fence key ' .. KEYS[2] .. ' holds '
      .. string.sub(last, 1, 40) .. ', not a fence below 2^53 - 1')
  end
  local fence = math.max(tonumber(last) + 1, rs_now_us())
  local text = rs_int(fence)
  redis.call('SET', KEYS[1], token .. ',' .. text, 'PX', ttl_arg)
  redis.call('SET', KEYS[2], text, 'PX', ttl_arg)
  redis.call('DEL', KEYS[3])
  return {1, fence, ttl_ms}
end
