-- acquire: take a free lease at the next generation.
--
-- KEYS[1] lease (holds "<owner_id>:<generation>")
-- KEYS[2] generation counter
-- ARGV[1] owner id
-- ARGV[2] ttl in milliseconds
-- Returns {1, generation} when acquired, {0, current token} when held.
--
-- The generation is max(stored + 1, Redis TIME in microseconds), so it
-- never goes backwards even when the counter is lost or older than the
-- last lease (a restart without persistence or from an older snapshot, a
-- failover to a replica that missed writes, or a reaped partition): only a
-- server clock set back by more than the time since the last acquire
-- could repeat one. TIME is safe in a script since Redis 7 replicates
-- scripts by their effects. Lua numbers are doubles, exact up to 2^53
-- (microseconds until the year 2255).
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local gen = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, now)
gen = string.format('%.0f', gen)
redis.call('SET', KEYS[2], gen)
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. gen, 'NX', 'PX', ARGV[2])
return {1, gen}
