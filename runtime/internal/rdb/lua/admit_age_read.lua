-- admit_age_read: the admitted confirmation ages of a handler's engines
-- (admit_age.lua) whose records have not ended by Redis's clock, for an
-- operator's Pause to wait the largest out. An ended record that no store
-- has removed yet is left out: its engine stopped relying on it
-- LeaseMargin before it ended (package lease). A script rather than a
-- plain read so that the call goes to the primary: a client that reads
-- from replicas (ReadOnly, RouteByLatency, RouteRandomly) would send a
-- read to one that may not have a store the primary answered.
--
-- KEYS[1] the handler's control hash (rdb.ControlKey)
-- Returns the records not ended, "<age ms>|<incarnation>". Reads only.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 6) == 'admit:' and (tonumber(all[i + 1]) or 0) > now then
    out[#out + 1] = string.sub(all[i], 7)
  end
end
return out
