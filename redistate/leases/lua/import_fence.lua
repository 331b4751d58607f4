--[[ import_fence: raise a lease name's fence key to an exported fence; never lower it.
KEYS[1]  fence key of the lease name (the last fence issued)
ARGV[1]  the exported fence (digits, at most 2^53 - 2)
ARGV[2]  the allowance, ms: how far past this server's clock the fence may be, and how
         long after the clock has passed it the key is kept
returns  {1, value}: the key was below (or absent) and is now ARGV[1];
         {0, current}: the key is already at or above ARGV[1]: unchanged
errors   RSARG on a malformed argument or a fence more than the allowance past the
         server's clock; RSINTEGRITY if the key holds something that is not a fence.
         Before any write.
Fences are max(last + 1, server TIME in µs), so an imported fence matters only until
the clock passes it: the key expires the allowance after that (an imported key never
lingers), with or without --force.
acl      every command checked: an import is many calls, one per item, and a
         command refused to some items and not others would import half
]]
local value, allowance = ARGV[1], ARGV[2]
if not string.match(value, '^%d+$') or #value > 16 or tonumber(value) >= 9007199254740991
    or not string.match(allowance, '^%d+$') or #allowance > 10 then
  return redis.error_reply('RSARG malformed arguments to import_fence')
end
local t = redis.call('TIME')
local fence, now_us = tonumber(value), tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence > now_us + tonumber(allowance) * 1000 then
  return redis.error_reply('RSARG fence ' .. value .. ' is more than ' .. allowance
    .. ' ms past the server clock (import_fence)')
end
local current = redis.call('GET', KEYS[1])
if current and (not string.match(current, '^%d+$') or #current > 16) then
  return redis.error_reply('RSINTEGRITY value at ' .. KEYS[1] .. ' is not a fence')
end
local stored = current and tonumber(current) or 0
if stored >= fence then return {0, stored} end
local keep_ms = math.max(0, math.floor((fence - now_us) / 1000)) + tonumber(allowance)
-- %.0f: plain digits (a Lua number would be written as 3.6e+06).
redis.call('SET', KEYS[1], value, 'PX', string.format('%.0f', keep_ms))
return {1, fence}
