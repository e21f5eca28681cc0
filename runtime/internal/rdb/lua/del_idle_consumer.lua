-- del_idle_consumer: delete a consumer of a group only if it has nothing
-- pending, in one step, so an entry it read after the caller's check is
-- never dropped from the pending list with it.
--
-- KEYS[1] stream
-- ARGV[1] group
-- ARGV[2] consumer
-- Returns 1 when deleted, 0 when it holds entries.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
