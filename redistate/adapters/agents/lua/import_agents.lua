--[[ import_agents: restore one exported OpenAI Agents SDK session (its items, a list)
unless the store holds different items for it.
KEYS[1]  the session's items, a list, oldest first
ARGV[1]  ttl in ms; "0" = no expiry
ARGV[2]  "1" = replace different stored items (--force), "0" = refuse
ARGV[3 ..]  the items, oldest first, stored as is (encoded by the store's codec)
returns  {1, count}: written; {1, 0}: the same items are stored (nothing changed);
         {0, stored}: refused, other items are stored (`stored` of them; unchanged)
errors   RSARG on malformed arguments, before any write.
acl      every command checked: an import is many calls, one per item, and a
         command refused to some items and not others would import half
]]
local ttl_ms = rs_ttl(ARGV[1])
if not ttl_ms or (ARGV[2] ~= '0' and ARGV[2] ~= '1') or #ARGV < 3 then
  return redis.error_reply('RSARG malformed arguments to import_agents')
end
local stored = redis.call('LRANGE', KEYS[1], 0, -1)
if #stored > 0 then
  local same = #stored == #ARGV - 2
  for i = 1, #stored do
    if same and stored[i] ~= ARGV[i + 2] then same = false end
  end
  if same then return {1, 0} end
  if ARGV[2] == '0' then return {0, #stored} end
  redis.call('DEL', KEYS[1])
end
-- RPUSH in slices: Lua's unpack() is limited by its C stack (LUAI_MAXCSTACK, 8000).
for at = 3, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, at, math.min(at + 999, #ARGV)))
end
if ttl_ms > 0 then redis.call('PEXPIRE', KEYS[1], ttl_ms) end
return {1, #ARGV - 2}
