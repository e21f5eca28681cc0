-- live_members: the members of a handler's member set whose heartbeat
-- (scored by Redis time, as member.lua writes it) is younger than the ttl.
--
-- KEYS[1] member set
-- ARGV[1] ttl in milliseconds
-- Returns the live owner ids.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[1]), '+inf')
