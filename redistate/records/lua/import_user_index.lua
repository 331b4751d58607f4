--[[ import_user_index: add exported entries to a user's index (what is registered to
the user, for users.erase); a union: no entry is ever removed.
KEYS[1]  the user's index, a set of "<kind>:<id>"
ARGV[1 ..]  the entries (checked by the caller), at least one
returns  {1, added}: how many entries were not there yet
errors   RSARG on no entries, before any write.
]]
if #ARGV == 0 then return redis.error_reply('RSARG no entries to import_user_index') end
local added = 0
-- SADD in slices: Lua's unpack() is limited by its C stack (LUAI_MAXCSTACK, 8000).
for at = 1, #ARGV, 1000 do
  added = added + redis.call('SADD', KEYS[1], unpack(ARGV, at, math.min(at + 999, #ARGV)))
end
return {1, added}
