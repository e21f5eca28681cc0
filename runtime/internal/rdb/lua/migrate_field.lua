-- migrate_field: move a value of the earlier key layout (a string key)
-- into a field of its layout-2 control hash, in one slot
-- (docs/upgrading.md, rdb.MigrateLayout).
--
-- KEYS[1] the earlier layout's key (a halt record, a pause mark)
-- KEYS[2] the control hash (rdb.MetaKey); absent for a key whose control
--         hash is in another slot (a handler's pause), which the caller
--         wrote first: then KEYS[1] is only deleted, if it still holds
--         ARGV[2]
-- ARGV[1] the field (halt, paused)
-- ARGV[2] without KEYS[2]: the value the caller moved
-- Returns 1 when moved (or deleted), 0 when the old key was gone or
-- changed. A field already there (written by this layout since) is
-- kept: the old value is only deleted. A second run finds the old key
-- gone.
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if KEYS[2] then
  redis.call('HSETNX', KEYS[2], ARGV[1], v)
elseif v ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
