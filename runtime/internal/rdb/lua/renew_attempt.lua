-- renew_attempt: extend the attempt mark begin_attempt.lua set to the
-- lease's remaining TTL, while the lease and the mark both name this
-- token: the renewer calls it beside the lease's renewal for as long as
-- the attempt of the halted head runs.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey)
-- ARGV[1] token
-- Returns 1 when extended; 0 when the lease or the mark names another
-- token or none (the attempt ended, or the lease moved on). Run twice, it
-- extends the mark twice to the same bound: the lease's expiry.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local m = redis.call('HGET', KEYS[2], 'attempt')
if not m or string.match(m, '^(.*) %d+$') ~= ARGV[1] then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], 'attempt', ARGV[1] .. ' ' .. (now + ttl))
return 1
