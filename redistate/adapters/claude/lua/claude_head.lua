--[[ claude_head: a Claude Agent SDK session's summary as an append folds from it
(redistate.claude), read in the round trip that enters the session in its project's
index.
KEYS[1]  the session's hash (claude_append.lua)
ARGV     none
returns  {version, summary}: "0" and "" for a session without a summary
unchecked hget
]]
return {redis.call('HGET', KEYS[1], 'v') or '0', redis.call('HGET', KEYS[1], 'sum') or ''}
