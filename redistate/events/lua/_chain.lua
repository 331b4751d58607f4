--[[ _chain: helpers for the event scripts' chain links (a library, not a script).
A link is a SHA-256 hex digest (64 lowercase hex digits) or, with signing keys, a seal
"<key id>:<HMAC-SHA-256 hex>" whose key id is 1-32 of [A-Za-z0-9_-].
]]

-- 64 lowercase hex digits: one scan for anything else (a pattern of 64 classes would
-- be parsed again at every character, twice on every append).
local function rs_hex64(s)
  return #s == 64 and not string.find(s, '[^0-9a-f]')
end

-- A digest or a seal, checked whole.
local function rs_link_ok(s)
  if rs_hex64(s) then return true end
  local colon = string.find(s, ':', 1, true)
  return colon ~= nil and colon > 1 and colon <= 33
    and not string.find(string.sub(s, 1, colon - 1), '[^%w_-]')
    and rs_hex64(string.sub(s, colon + 1))
end
