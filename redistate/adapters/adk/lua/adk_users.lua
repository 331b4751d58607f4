--[[ adk_users: enter a user in an ADK app's set of users with sessions (redistate.adk),
before the user's first session is created, so that listing the app's sessions finds it.
KEYS[1]  the app's users: a set of user ids
ARGV[1]  the user id
returns  1
errors   RSARG on malformed arguments.
unchecked sadd
]]
if #ARGV ~= 1 then return redis.error_reply('RSARG malformed arguments to adk_users') end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
