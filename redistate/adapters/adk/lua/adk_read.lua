--[[ adk_read: an ADK user's or app's state (redistate.adk), read beside the sessions
of the same call in one round trip.
KEYS[1]  the state: a hash, key -> value encoded by the codec
ARGV     none
returns  its fields and values, flat
errors   none.
unchecked hgetall
]]
return redis.call('HGETALL', KEYS[1])
