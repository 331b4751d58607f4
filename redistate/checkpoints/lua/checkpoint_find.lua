--[[ checkpoint_find: one checkpoint of a task, by id, with its id entry.
KEYS[1]  checkpoint list
KEYS[2]  id list, aligned with KEYS[1]
KEYS[3]  the id -> position index of KEYS[2] (_checkpoint_index)
ARGV[1]  the checkpoint id
returns  {{entry}, {blob}} if the history holds it, else {{}, {}}
O(1) in the history's length while the index matches the id list; else the list is
scanned once and the index rebuilt (a write: the only one this lookup makes).
unchecked llen
]]
local at, entry = rs_ck_find(KEYS[2], KEYS[3], ARGV[1])
if at then return {{entry}, {redis.call('LINDEX', KEYS[1], at)}} end
return {{}, {}}
