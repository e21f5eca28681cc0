-- reclaim: a new owner takes its predecessors' in-flight entries.
--
-- KEYS[1] lease
-- KEYS[2..] lanes
-- ARGV[1] token, also the consumer name
-- ARGV[2] group
-- Returns the number of entries moved; the SEQBY_FENCED error when the
-- lease does not hold the token.
--
-- Creates the group (from id 0) on every existing lane where missing,
-- moves every pending entry of the group to the token's consumer, then
-- deletes consumers that hold nothing, so past generations do not pile up
-- in the group.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local moved = 0
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    -- A lease generation's group takes over a lane made after the
    -- acquire (join() from lib/groups.lua); the shared one is created.
    join(KEYS[i], ARGV[2], ARGV[1])
    local cursor = '0-0'
    repeat
      local r = redis.call('XAUTOCLAIM', KEYS[i], ARGV[2], ARGV[1], 0, cursor, 'COUNT', 100, 'JUSTID')
      cursor = r[1]
      moved = moved + #r[2]
    until cursor == '0-0'
    local cs = redis.pcall('XINFO', 'CONSUMERS', KEYS[i], ARGV[2])
    if type(cs) == 'table' and not cs.err then
      for _, c in ipairs(cs) do
        local name, pending
        for j = 1, #c, 2 do
          if c[j] == 'name' then name = c[j + 1] end
          if c[j] == 'pending' then pending = c[j + 1] end
        end
        if name and name ~= ARGV[1] and pending == 0 then
          redis.call('XGROUP', 'DELCONSUMER', KEYS[i], ARGV[2], name)
        end
      end
    end
  end
end
return moved
