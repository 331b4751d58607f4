--[[ adk_users: add members to a set, before the write they announce (redistate.adk): a
user to an ADK app's users, before the user's first session is created, so that listing
the app's sessions finds it; or a session and its user to a redistate user's index
(RedistateSessionService(register_users=True)), so that users.erase finds them.
KEYS[1]  the set: an app's users (user ids), or a user's index (``<kind>:<id>``)
ARGV     the members (at least one)
returns  1
errors   RSARG on malformed arguments.
unchecked sadd
]]
if #ARGV == 0 then return redis.error_reply('RSARG malformed arguments to adk_users') end
redis.call('SADD', KEYS[1], unpack(ARGV))
return 1
