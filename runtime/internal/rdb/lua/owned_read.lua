-- owned_read: the unexpired owned counts record.lua wrote for some
-- instances.
--
-- KEYS[1] the handler's control hash (rdb.ControlKey)
-- ARGV    owner ids
-- Returns one element per owner: its count (a string), or false when it
-- has no unexpired record. Reads only.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #ARGV do
  local v = redis.call('HGET', KEYS[1], 'owned:' .. ARGV[i])
  local exp, n = string.match(v or '', '^(%d+) (%d+)$')
  if n and tonumber(exp) > now then out[i] = n else out[i] = false end
end
return out
