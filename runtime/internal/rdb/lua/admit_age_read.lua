-- admit_age_read: the admitted confirmation ages of a handler's engines
-- (admit_age.lua) whose records have not ended by Redis's clock, for an
-- operator's Pause to wait the largest out. An ended member that no store
-- has removed yet is left out: its engine stopped relying on it
-- LeaseMargin before it ended (runtime/admitage.go). A script rather than
-- a plain read so that the call goes to the primary: a client that reads
-- from replicas (ReadOnly, RouteByLatency, RouteRandomly) would send a
-- ZRANGEBYSCORE to one that may not have a store the primary answered.
--
-- KEYS[1] the handler's admitted-age set
-- Returns the members not ended, "<age ms>|<incarnation>". Reads only.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
