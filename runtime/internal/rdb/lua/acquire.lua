-- acquire: take a free lease at the next generation.
--
-- KEYS[1] lease (holds "{owner_id}:{generation}")
-- KEYS[2] generation counter (never deleted, so it never goes backwards)
-- ARGV[1] owner id
-- ARGV[2] ttl in milliseconds
-- Returns {1, generation} when acquired, {0, current token} when held.
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur} end
local gen = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. gen, 'NX', 'PX', ARGV[2])
return {1, gen}
