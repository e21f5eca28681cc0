-- reap_categories: announce the categories an engine wants reaped, and
-- list every category announced lately, for the maintenance leader.
--
-- KEYS[1] the categories set (ReapCategoriesKey)
-- ARGV[1] how long an announcement counts, in milliseconds
-- ARGV[2..] the members to announce (JSON: category, reap after ms,
--           backfill suffix)
-- Returns every member announced within ARGV[1], by score.
--
-- A member's score is the Redis time of its last announcement (GT: never
-- lowered, should a failover bring a server whose clock is behind).
-- Older members are dropped, and the set expires ARGV[1] after the last
-- announcement, so it holds what live engines announce and ends when
-- none does. Run twice, a call announces the same members again: only
-- their scores move.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'GT', now, ARGV[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
if #ARGV > 1 then redis.call('PEXPIRE', KEYS[1], ttl) end
return redis.call('ZRANGEBYSCORE', KEYS[1], now - ttl, '+inf')
