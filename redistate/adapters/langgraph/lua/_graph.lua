--[[ _graph: helpers prepended to the LangGraph thread scripts (a library, not a
script; redistate.langgraph, redistate/graph.py). A thread's keys, in its hash slot:
KEYS[1] cp hash: 'c|<m>' the packed checkpoint, 'r|<m>' the blob fields it uses
        joined by "\1", 'u|<m>' its run id; <m> = "<checkpoint_ns>\0<checkpoint_id>";
        'delta' = "1" once a checkpoint of the thread used a DeltaChannel
KEYS[2] idx, a zset of every <m>, all at score 0: lexicographic = by ns, then by id
        (LangGraph's ids are time-ordered uuid6)
KEYS[3] blobs hash: "<ns>\0<channel>\0<version>" -> packed channel value
KEYS[4] refs hash: blob field -> how many checkpoints use it (0: the blob goes)
KEYS[5] writes hash: "<m>\0<task_path>\0<task_id>\0<idx+10^9, 10 digits>" -> packed
KEYS[6] widx, a zset of those write fields (lex order = LangGraph's writes order)
KEYS[7] runs, a zset of "<run_id>\0<m>"
]]

local function rs_split(text, sep)
  local out = {}
  if text == nil or text == '' then return out end
  local start = 1
  while true do
    local at = string.find(text, sep, start, true)
    if not at then
      out[#out + 1] = string.sub(text, start)
      return out
    end
    out[#out + 1] = string.sub(text, start, at - 1)
    start = at + 1
  end
end

-- Every write stored for checkpoint <m>: its fields, in order.
local function rs_writes_of(m)
  return redis.call('ZRANGEBYLEX', KEYS[6], '[' .. m .. '\0', '[' .. m .. '\0\255')
end

-- Remove checkpoint <m> with its writes; blobs no other checkpoint uses go too.
local function rs_remove(m)
  local refs = redis.call('HGET', KEYS[1], 'r|' .. m)
  if not refs then return 0 end
  for _, field in ipairs(rs_split(refs, '\1')) do
    if redis.call('HINCRBY', KEYS[4], field, -1) <= 0 then
      redis.call('HDEL', KEYS[4], field)
      redis.call('HDEL', KEYS[3], field)
    end
  end
  local run = redis.call('HGET', KEYS[1], 'u|' .. m)
  if run and run ~= '' then redis.call('ZREM', KEYS[7], run .. '\0' .. m) end
  for _, w in ipairs(rs_writes_of(m)) do redis.call('HDEL', KEYS[5], w) end
  redis.call('ZREMRANGEBYLEX', KEYS[6], '[' .. m .. '\0', '[' .. m .. '\0\255')
  redis.call('HDEL', KEYS[1], 'c|' .. m, 'r|' .. m, 'u|' .. m)
  redis.call('ZREM', KEYS[2], m)
  return 1
end

-- HMGET of any number of fields ("" for a missing one), in slices: Lua's unpack() is
-- limited by its C stack (about 8000 values).
local function rs_hmget(key, fields)
  local out = {}
  for at = 1, #fields, 1000 do
    local got = redis.call('HMGET', key, unpack(fields, at, math.min(at + 999, #fields)))
    for i = 1, #got do out[#out + 1] = got[i] or '' end
  end
  return out
end

-- One checkpoint as the readers return it: {m, packed, refs, blob values, write fields,
-- write values}.
local function rs_read(m)
  local packed = redis.call('HGET', KEYS[1], 'c|' .. m)
  if not packed then return nil end
  local refs = rs_split(redis.call('HGET', KEYS[1], 'r|' .. m), '\1')
  local wfields = rs_writes_of(m)
  return {m, packed, refs, rs_hmget(KEYS[3], refs), wfields, rs_hmget(KEYS[5], wfields)}
end

-- Writes of namespace <ns> (given as "<ns>\0") for checkpoints older than the oldest one
-- kept: stored after the history cap removed their checkpoint (LangGraph saves a step's
-- writes in the background), they would never be read.
local function rs_drop_orphans(ns)
  local oldest = redis.call('ZRANGEBYLEX', KEYS[2], '[' .. ns, '[' .. ns .. '\255', 'LIMIT', 0, 1)[1]
  if not oldest then return end
  local orphans = redis.call('ZRANGEBYLEX', KEYS[6], '[' .. ns, '(' .. oldest)
  for at = 1, #orphans, 1000 do
    redis.call('HDEL', KEYS[5], unpack(orphans, at, math.min(at + 999, #orphans)))
  end
  if #orphans > 0 then redis.call('ZREMRANGEBYLEX', KEYS[6], '[' .. ns, '(' .. oldest) end
end

-- Every key of the thread expires in ttl_ms (0: left as it is).
local function rs_expire(ttl_ms)
  if ttl_ms > 0 then
    for i = 1, 7 do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
  end
end
