-- record: write (or delete) an engine instance's record in a handler's
-- control hash (rdb.ControlKey), and drop the records that have expired.
-- Records: owned:<owner>, how many of the handler's partitions the
-- instance holds (each heartbeat); faults:<owner>, its faults of the
-- handler (JSON, while it has any). Each holds "<expiry, Redis ms> <value>".
--
-- KEYS[1] the handler's control hash
-- ARGV[1] the field (owned:<owner> or faults:<owner>)
-- ARGV[2] the value; "" deletes the record
-- ARGV[3] ttl in milliseconds
-- Returns 1.
--
-- Readers take only unexpired records (owned_read.lua, rdb.Faults); a
-- writer drops the expired ones, so the fields are bounded by the
-- instances alive within a ttl, and a killed instance's records go at
-- the next heartbeat of any other. Run twice, it writes the same record
-- with a later expiry (or deletes it again).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 6) == 'owned:' or string.sub(f, 1, 7) == 'faults:' then
    -- Only a record in this format, expired, goes: a value it cannot read
    -- (a later release's) is left to its writer.
    local exp = tonumber(string.match(all[i + 1], '^(%d+) ') or '')
    if exp and exp <= now then redis.call('HDEL', KEYS[1], f) end
  end
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', now + tonumber(ARGV[3])) .. ' ' .. ARGV[2])
end
return 1
