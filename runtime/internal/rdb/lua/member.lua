-- member: an engine instance joins (heartbeats) or leaves a handler's
-- member set. Scores by Redis time, so instances with skewed clocks agree,
-- and drops members whose heartbeat is older than the ttl.
--
-- KEYS[1] member set
-- ARGV[1] owner id
-- ARGV[2] ttl in milliseconds
-- ARGV[3] "1" join, "0" leave
-- Returns the number of live members.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return redis.call('ZCARD', KEYS[1])
