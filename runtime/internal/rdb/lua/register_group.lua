-- register_group: record a consumer group (a handler) of a category, so
-- retention keeps what the group has not read even on streams where it
-- does not exist yet, and fix where a brand-new handler starts.
--
-- KEYS[1] the category's group registry (hash: group -> start id)
-- ARGV[1] group
-- ARGV[2] "retained" (start from the first entry still retained) or "new"
--         (only entries after its first registration)
-- Returns the group's start id: "0", or "<Redis ms at registration>-0".
-- A group registered before keeps its start.
local start = '0'
if ARGV[2] == 'new' then
  local t = redis.call('TIME')
  start = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) .. '-0'
end
redis.call('HSETNX', KEYS[1], ARGV[1], start)
return redis.call('HGET', KEYS[1], ARGV[1])
