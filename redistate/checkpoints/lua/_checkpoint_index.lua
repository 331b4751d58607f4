--[[ _checkpoint_index: a task's checkpoint id -> position index (a library, prepended
to the scripts that call it). A hash beside the id list, in the task's hash slot
(KeySpace.task_index, "ns:task:{t}:index"):
  <checkpoint id>  its push number p (digits)
  ":head"          "<P>,<length>,<dups>,<head entry>": the head's push number, the id
                   list's length and its head element when the index was last brought
                   up to date; dups "1" if an id is in the list twice (an imported
                   file's: a save never pushes an id the list holds), else "0"
Saves push at the head and trim the tail; nothing else moves an id entry (migrate and
rotate-keys rewrite blobs in place), so the entry pushed as p is at position P - p.
The index is used only while ":head" matches the list (same length, same head element):
a save by code that predates the index, a trim, an import or a delete shows as a
mismatch. A position is always checked with LINDEX, never trusted. On either mismatch
the list is scanned once and the index rebuilt from that scan.
]]
local RS_CK_HEAD = ':head'  -- a checkpoint id holds no ':'

-- The checkpoint id an id entry names, or nil (damaged).
local function rs_ck_id(entry)
  return string.match(entry, '^%d+,%d+,%d+,([%w_-]+),')
end

local function rs_ck_head(p, n, dups, entry)
  return rs_int(p) .. ',' .. rs_int(n) .. ',' .. dups .. ',' .. entry
end

-- (P, length, dups) when the index matches the id list, else nil. A task with no id
-- entries has an empty index (P 0), which its first save starts: whatever an index
-- held for a list now gone (deleted or evicted by code without the index) is dropped.
-- ``n`` and ``first``: the list's length and head element if the caller just read them.
local function rs_ck_valid(ids_key, index_key, n, first)
  n = n or redis.call('LLEN', ids_key)
  if n == 0 then
    redis.call('DEL', index_key)
    return 0, 0, '0'
  end
  local head = redis.call('HGET', index_key, RS_CK_HEAD)
  if not head then return nil end
  local p, length, dups, entry = string.match(head, '^(%d+),(%d+),([01]),(.*)$')
  if not p or tonumber(length) ~= n
      or (first or redis.call('LINDEX', ids_key, 0)) ~= entry then
    return nil
  end
  return tonumber(p), n, dups
end

-- Rebuild the index from the id list's entries (LRANGE 0 -1 of it); it takes the id
-- list's expiry. A repeated id maps to its newest entry, the one a scan finds. Returns P.
local function rs_ck_rebuild(ids_key, index_key, entries)
  redis.call('DEL', index_key)
  local n = #entries
  if n == 0 then return 0 end
  local fields, seen, dups = {}, {}, '0'
  for i, entry in ipairs(entries) do
    local id = rs_ck_id(entry)
    if id and seen[id] then dups = '1' end
    if id and not seen[id] then
      seen[id] = true
      fields[#fields + 1] = id
      fields[#fields + 1] = rs_int(n - i + 1)
    end
  end
  fields[#fields + 1] = RS_CK_HEAD
  fields[#fields + 1] = rs_ck_head(n, n, dups, entries[1])
  -- HSET in slices: Lua's unpack() is limited by its C stack (LUAI_MAXCSTACK, 8000).
  for at = 1, #fields, 1000 do
    redis.call('HSET', index_key, unpack(fields, at, math.min(at + 999, #fields)))
  end
  local ttl = redis.call('PTTL', ids_key)
  if ttl > 0 then redis.call('PEXPIRE', index_key, ttl) end
  return n
end

-- Where checkpoint ``id`` is: its 0-based position and id entry, or nil; then P and the
-- list's length after the call (the index matches the list then, rebuilt if it did not).
local function rs_ck_find(ids_key, index_key, id)
  local p_head, n = rs_ck_valid(ids_key, index_key)
  if p_head then
    local p = redis.call('HGET', index_key, id)
    if not p then return nil, nil, p_head, n end
    local at = p_head - tonumber(p)
    if at >= 0 and at < n then
      local entry = redis.call('LINDEX', ids_key, at)
      if entry and rs_ck_id(entry) == id then return at, entry, p_head, n end
    end
  end
  local entries = redis.call('LRANGE', ids_key, 0, -1)
  p_head = rs_ck_rebuild(ids_key, index_key, entries)
  for i, entry in ipairs(entries) do
    if rs_ck_id(entry) == id then return i - 1, entry, p_head, #entries end
  end
  return nil, nil, p_head, #entries
end

-- After a save pushed ``entry`` (for ``id``) onto an id list that had ``n`` entries and
-- an index at ``p_head`` (``dups`` as its head says): trims the id list to ``keep``
-- (RPOP: the trimmed entries come back, no second read) and takes the trimmed entries
-- out of the index (with dups, only where it maps them to that very entry: a repeated
-- id keeps its newest), the new one in. An index with more fields than the list can
-- need is dropped (rebuilt when next looked in): its size stays bounded by the list's.
-- Fields <= length + 1 holds after a rebuild and after each save that dropped a field
-- per entry it trimmed, so HLEN is read only when one was not (a damaged entry).
local function rs_ck_pushed(ids_key, index_key, p_head, n, dups, id, entry, keep)
  local top, clean = p_head + 1, true
  if n + 1 > keep then
    for j, old in ipairs(redis.call('RPOP', ids_key, n + 1 - keep)) do
      local old_id = rs_ck_id(old)
      if not old_id then
        clean = false
      elseif dups == '0' then
        redis.call('HDEL', index_key, old_id)
      elseif redis.call('HGET', index_key, old_id)
          == rs_int(top - (n + 1 - j)) then  -- popped from n, n - 1...
        redis.call('HDEL', index_key, old_id)
      else
        clean = false
      end
    end
  end
  local length = math.min(n + 1, keep)
  redis.call('HSET', index_key, id, rs_int(top),
    RS_CK_HEAD, rs_ck_head(top, length, dups, entry))
  if not clean and redis.call('HLEN', index_key) > length + 1 then
    redis.call('DEL', index_key)
  end
end
